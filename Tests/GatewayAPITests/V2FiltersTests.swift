import Foundation
import Hummingbird
import HummingbirdTesting
import PushCore
import XCTest

@testable import Gateway
@testable import GatewayAPI

/// `filters` on v2 subscriptions (issue 20, item 3): validated at subscribe time (400), returned in the
/// document, kept by a PUT that does not name them, replaced by a POST with `allowsUpdate`, never part of the id.
final class V2FiltersTests: XCTestCase {
    func makeApp() async throws -> (GatewayHarness, Application<RouterResponder<GatewayRequestContext>>) {
        var settings = AppSettings()
        settings.authKeys = [.object(["alg": .string("HS256"), "secret": .string(V2RoutesTests.secret)])]
        settings.rules = .object([
            "rules": .object(["users": .object(["$uid": .object([".read": .string("auth != null && auth.uid == $uid")])])])
        ])
        settings.subscriptionTTLSeconds = 3600
        let harness = try GatewayHarness(apps: ["toto": settings])
        try await harness.start()
        addTeardownBlock { await harness.stop() }
        return (harness, Application(router: harness.router()))
    }

    static let base = "/datasync/v2/toto/subscriptions/alice"

    static func subscription(mode: String, filters: JSONValue?) -> ByteBuffer {
        var fields: [ExactString: JSONValue] = [
            "kind": .string("mobile"), "mode": .string(mode), "path": .string("/users/alice/inbox"), "context": .string("fcm-token-1"),
        ]
        if let filters { fields["filters"] = filters }
        return V2RoutesTests.body(fields)
    }

    static func filters(_ text: String) -> JSONValue { (try? JSONParser.parse(text)) ?? .null }

    func testFiltersAreValidatedReturnedKeptAndReplaced() async throws {
        let (store, app) = try await makeApp()
        let headers = V2RoutesTests.headers()
        let expectedID = SubscriptionID.make(
            app: "toto", uid: "alice", kind: .mobile, path: try DataPath("/users/alice/inbox"), context: "fcm-token-1")
        try await app.test(.router) { client in
            func refused(_ body: ByteBuffer, method: HTTPRequest.Method = .post, uri: String = Self.base) async throws -> String? {
                try await client.execute(uri: uri, method: method, headers: headers, body: body) { response in
                    XCTAssertEqual(response.status, .badRequest)
                    let document = try V2RoutesTests.json(response)
                    XCTAssertEqual(document["status"] as? String, "bad_request")
                    return document["message"] as? String
                }
            }
            // Refused at subscribe time, with a message naming the problem; nothing is written.
            let eventsInValue = try await refused(Self.subscription(mode: "value", filters: Self.filters(#"{"events":["added"]}"#)))
            XCTAssertEqual(eventsInValue, "'filters.events' applies to childEvent mode only, not value: leave it out")
            let emptyKeys = try await refused(Self.subscription(mode: "noData", filters: Self.filters(#"{"keys":[]}"#)))
            XCTAssertEqual(emptyKeys, "'filters.keys' must not be empty (leave it out to be woken for every child)")
            let badKey = try await refused(Self.subscription(mode: "noData", filters: Self.filters(#"{"keys":["a.b"]}"#)))
            XCTAssertEqual(badKey, "'filters.keys' key 'a.b' is not a child key (empty, or holds / . $ # [ ] or a control character)")
            let notObject = try await refused(Self.subscription(mode: "noData", filters: .array([])))
            XCTAssertEqual(notObject, #"'filters' must be an object: {"keys": [...], "events": [...]}"#)
            XCTAssertEqual(store.subscriptions("toto").count, 0)

            // Created with filters: returned sorted; the id is the tuple's, whatever the filters.
            let filters = Self.filters(#"{"keys":["b","a"],"events":["removed","added"]}"#)
            try await client.execute(
                uri: Self.base, method: .post, headers: headers, body: Self.subscription(mode: "childEvent", filters: filters)
            ) { response in
                XCTAssertEqual(response.status, .created)
                XCTAssertEqual(
                    String(buffer: response.body),
                    #"{"context":"fcm-token-1","expirationTimestampSeconds":"#
                        + "\(store.subscriptions("toto").first?.settings.expiresAt ?? 0)"
                        + #","filters":{"events":["added","removed"],"keys":["a","b"]},"format":"v2","id":"\#(expectedID)","kind":"mobile","mode":"childEvent","path":"/users/alice/inbox","uid":"alice"}"#)
            }
            let stored = try SubscriptionFilters(keys: ["a", "b"], events: [.added, .removed])
            XCTAssertEqual(store.subscriptions("toto").first?.settings.filters, stored)
            let item = "\(Self.base)/\(expectedID)"
            // A PUT that does not name them keeps them; one that would leave `events` outside childEvent is refused.
            try await client.execute(
                uri: item, method: .put, headers: headers, body: V2RoutesTests.body(["format": .string("v1")])
            ) { response in
                XCTAssertEqual(response.status, .ok)
                XCTAssertNotNil(try V2RoutesTests.json(response)["filters"])
            }
            XCTAssertEqual(store.subscriptions("toto").first?.settings.filters, stored)
            let modeChange = try await refused(V2RoutesTests.body(["mode": .string("value")]), method: .put, uri: item)
            XCTAssertEqual(modeChange, "'filters.events' applies to childEvent mode only, not value: leave it out")
            // A PUT naming them replaces them; `{}` removes them.
            try await client.execute(
                uri: item, method: .put, headers: headers,
                body: V2RoutesTests.body(["mode": .string("value"), "filters": Self.filters(#"{"keys":["c"]}"#)])
            ) { response in
                XCTAssertEqual(response.status, .ok)
            }
            XCTAssertEqual(store.subscriptions("toto").first?.settings.filters, try SubscriptionFilters(keys: ["c"]))
            try await client.execute(
                uri: item, method: .put, headers: headers, body: V2RoutesTests.body(["filters": .object([:])])
            ) { response in
                XCTAssertEqual(response.status, .ok)
                XCTAssertNil(try V2RoutesTests.json(response)["filters"])
            }
            XCTAssertNil(store.subscriptions("toto").first?.settings.filters)
            // POST with allowsUpdate replaces the whole document: without `filters`, none.
            try await client.execute(
                uri: Self.base, method: .post, headers: headers, body: Self.subscription(mode: "noData", filters: Self.filters(#"{"keys":["d"]}"#))
            ) { response in
                XCTAssertEqual(response.status, .conflict)
            }
            try await client.execute(
                uri: Self.base + "?allowsUpdate=true", method: .post, headers: headers,
                body: Self.subscription(mode: "noData", filters: Self.filters(#"{"keys":["d"]}"#))
            ) { response in
                XCTAssertEqual(response.status, .ok)
                XCTAssertEqual(try V2RoutesTests.json(response)["id"] as? String, expectedID)
            }
            XCTAssertEqual(store.subscriptions("toto").first?.settings.filters, try SubscriptionFilters(keys: ["d"]))
            try await client.execute(
                uri: Self.base + "?allowsUpdate=true", method: .post, headers: headers, body: Self.subscription(mode: "noData", filters: nil)
            ) { response in
                XCTAssertEqual(response.status, .ok)
            }
            XCTAssertNil(store.subscriptions("toto").first?.settings.filters)
        }
    }
}
