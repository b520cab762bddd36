import Foundation
import Hummingbird
import HummingbirdTesting
import PushCore
import XCTest

@testable import Gateway
@testable import GatewayAPI

/// `POST /datasync/v2/{app}/subscriptions/{uid}/.replace-context` (issue 20, item 6): a rotated push token moves
/// every subscription of the user in one decision. The end-to-end test with the real binary and Tansu is
/// `tests/e2e/test_replace_context.py`.
final class ReplaceContextTests: XCTestCase {
    typealias V2 = V2RoutesTests
    static let base = "/datasync/v2/toto/subscriptions"

    func makeApp(quotas: (inout AppQuotas) -> Void = { _ in }) async throws -> (
        GatewayHarness, Application<RouterResponder<GatewayRequestContext>>
    ) {
        var settings = AppSettings()
        settings.authKeys = [.object(["alg": .string("HS256"), "secret": .string(V2.secret)])]
        settings.rules = .object([
            "rules": .object([
                "public": .object([".read": .bool(true)]),
                "users": .object(["$uid": .object([".read": .string("auth != null && auth.uid == $uid")])]),
            ])
        ])
        quotas(&settings.quotas)
        let harness = try GatewayHarness(apps: ["toto": settings])
        try await harness.start()
        addTeardownBlock { await harness.stop() }
        return (harness, Application(router: harness.router()))
    }

    static func subscription(path: String, context: String, mode: String = "noData") -> ByteBuffer {
        V2.body(["kind": .string("mobile"), "mode": .string(mode), "path": .string(path), "context": .string(context)])
    }

    static func replacement(old: String, new: String, kind: String = "mobile") -> ByteBuffer {
        V2.body(["kind": .string(kind), "oldContext": .string(old), "newContext": .string(new)])
    }

    /// Creates a subscription (201) and returns its id.
    @discardableResult
    static func create(_ client: some TestClientProtocol, uid: String = "alice", path: String, context: String, mode: String = "noData")
        async throws -> String
    {
        try await client.execute(
            uri: "\(base)/\(uid)", method: .post, headers: V2.headers(uid), body: subscription(path: path, context: context, mode: mode)
        ) { response in
            XCTAssertEqual(response.status, .created)
            return try XCTUnwrap(try V2.json(response)["id"] as? String)
        }
    }

    /// Replaces and returns the answer's `subscriptions` and `moved` (from → id), asserting `status`.
    static func replace(
        _ client: some TestClientProtocol, uid: String = "alice", as caller: String? = nil, old: String, new: String,
        status: HTTPResponse.Status = .ok
    ) async throws -> (subscriptions: [[String: Any]], moved: [String: String], status: String?) {
        try await client.execute(
            uri: "\(base)/\(uid)/.replace-context", method: .post, headers: V2.headers(caller ?? uid), body: replacement(old: old, new: new)
        ) { response in
            XCTAssertEqual(response.status, status)
            let body = try V2.json(response)
            let moved = (body["moved"] as? [[String: String]] ?? []).reduce(into: [String: String]()) { $0[$1["from"] ?? ""] = $1["id"] }
            return (body["subscriptions"] as? [[String: Any]] ?? [], moved, body["status"] as? String)
        }
    }

    static func list(_ client: some TestClientProtocol, uid: String = "alice") async throws -> [[String: Any]] {
        try await client.execute(uri: "\(base)/\(uid)", method: .get, headers: V2.headers(uid)) { response in
            XCTAssertEqual(response.status, .ok)
            return try XCTUnwrap(try V2.json(response)["subscriptions"] as? [[String: Any]])
        }
    }

    func testEverySubscriptionOfTheOldTokenMovesAndARepeatMovesNothing() async throws {
        let (harness, app) = try await makeApp()
        try await app.test(.router) { client in
            let inbox = try await Self.create(client, path: "/users/alice/inbox", context: "old-token", mode: "value")
            let news = try await Self.create(client, path: "/public/news", context: "old-token")
            let tablet = try await Self.create(client, path: "/public/news", context: "tablet-token")
            // Another user on the same device: not the caller's, not moved.
            let bobs = try await Self.create(client, uid: "bob", path: "/public/news", context: "old-token")

            let first = try await Self.replace(client, old: "old-token", new: "new-token")
            XCTAssertEqual(first.subscriptions.map { $0["path"] as? String }, ["/public/news", "/users/alice/inbox"], "list order: by path")
            XCTAssertEqual(first.subscriptions.map { $0["context"] as? String }, ["new-token", "new-token"])
            XCTAssertEqual(first.subscriptions.map { $0["mode"] as? String }, ["noData", "value"], "settings move with them")
            let newIDs = first.subscriptions.compactMap { $0["id"] as? String }
            XCTAssertEqual(
                newIDs,
                [
                    SubscriptionID.make(app: "toto", uid: "alice", kind: .mobile, path: try DataPath("/public/news"), context: "new-token"),
                    SubscriptionID.make(app: "toto", uid: "alice", kind: .mobile, path: try DataPath("/users/alice/inbox"), context: "new-token"),
                ], "new ids: the function of the new tuple")
            XCTAssertEqual(first.moved, [news: newIDs[0], inbox: newIDs[1]])

            // Durable and applied before the answer: the old ids are gone, the new ones are there.
            for id in [inbox, news] {
                try await client.execute(uri: "\(Self.base)/alice/\(id)", method: .get, headers: V2.headers()) { response in
                    XCTAssertEqual(response.status, .notFound)
                }
            }
            let listed = try await Self.list(client)
            XCTAssertEqual(Set(listed.compactMap { $0["id"] as? String }), Set(newIDs + [tablet]))
            let bobsList = try await Self.list(client, uid: "bob")
            XCTAssertEqual(bobsList.compactMap { $0["id"] as? String }, [bobs], "bob's stays on the old token")

            // Idempotent: the same call again moves nothing and answers the same subscriptions.
            let again = try await Self.replace(client, old: "old-token", new: "new-token")
            XCTAssertEqual(again.subscriptions.compactMap { $0["id"] as? String }, newIDs)
            XCTAssertEqual(again.moved, [:])
            let afterRepeat = try await Self.list(client)
            XCTAssertEqual(Set(afterRepeat.compactMap { $0["id"] as? String }), Set(newIDs + [tablet]))
        }
        let tokens = harness.subscriptions("toto").map { "\($0.subscriber.uid ?? "")/\($0.subscriber.token)" }.sorted()
        XCTAssertEqual(tokens, ["alice/new-token", "alice/new-token", "alice/tablet-token", "bob/old-token"])
    }

    func testAUserWithNoSubscriptionOfTheOldTokenGetsAnEmptyAnswer() async throws {
        let (harness, app) = try await makeApp()
        try await app.test(.router) { client in
            try await Self.create(client, path: "/public/news", context: "other-token")
            let answer = try await Self.replace(client, old: "never-used", new: "new-token")
            XCTAssertEqual(answer.subscriptions.count, 0)
            XCTAssertEqual(answer.moved, [:])
            // A user with no subscription at all: the same.
            let nobody = try await Self.replace(client, uid: "carol", old: "never-used", new: "new-token")
            XCTAssertEqual(nobody.subscriptions.count, 0)
        }
        XCTAssertEqual(harness.subscriptions("toto").map(\.subscriber.token), ["other-token"])
    }

    func testASubscriptionTheNewTokenAlreadyHasIsKeptAsItIs() async throws {
        let (_, app) = try await makeApp()
        try await app.test(.router) { client in
            // The device already subscribed again with its new token (seed 001's procedure), in another mode.
            let old = try await Self.create(client, path: "/public/news", context: "old-token")
            let kept = try await Self.create(client, path: "/public/news", context: "new-token", mode: "value")
            let answer = try await Self.replace(client, old: "old-token", new: "new-token")
            XCTAssertEqual(answer.subscriptions.map { $0["id"] as? String }, [kept])
            XCTAssertEqual(answer.subscriptions.map { $0["mode"] as? String }, ["value"], "the new token's own subscription wins")
            XCTAssertEqual(answer.moved, [old: kept])
            let listed = try await Self.list(client)
            XCTAssertEqual(listed.compactMap { $0["id"] as? String }, [kept])
        }
    }

    func testTheMovedSubscriptionsAreNotRefusedBecauseTheOldOnesStillCount() async throws {
        // Alice is at the per-user and the per-device limits, and the app at its limit: the move creates as many
        // as it removes, so no count grows.
        let (harness, app) = try await makeApp {
            $0.maxSubscriptionsPerUser = 3
            $0.maxSubscriptionsPerDevice = 3
            $0.maxSubscriptionsPerApp = 3
        }
        try await app.test(.router) { client in
            for path in ["/public/a", "/public/b", "/public/c"] { try await Self.create(client, path: path, context: "old-token") }
            try await client.execute(
                uri: "\(Self.base)/alice", method: .post, headers: V2.headers(),
                body: Self.subscription(path: "/public/d", context: "old-token")
            ) { response in
                XCTAssertEqual(response.status, .tooManyRequests, "at the limits")
            }
            let answer = try await Self.replace(client, old: "old-token", new: "new-token")
            XCTAssertEqual(answer.moved.count, 3)
        }
        XCTAssertEqual(Set(harness.subscriptions("toto").map(\.subscriber.token)), ["new-token"])
    }

    func testTheNewTokensPerDeviceQuotaRefusesTheWholeMove() async throws {
        let (harness, app) = try await makeApp { $0.maxSubscriptionsPerDevice = 2 }
        try await app.test(.router) { client in
            // The new token already has one subscription (bob's): alice's two would make three.
            try await Self.create(client, uid: "bob", path: "/public/a", context: "new-token")
            let a = try await Self.create(client, path: "/public/a", context: "old-token")
            let b = try await Self.create(client, path: "/public/b", context: "old-token")
            let refused = try await Self.replace(client, old: "old-token", new: "new-token", status: .tooManyRequests)
            XCTAssertEqual(refused.status, "quota_exceeded")
            let listed = try await Self.list(client)
            XCTAssertEqual(Set(listed.compactMap { $0["id"] as? String }), [a, b], "nothing moved")
        }
        XCTAssertEqual(harness.subscriptions("toto").filter { $0.subscriber.token == "new-token" }.count, 1)
    }

    func testTheCallersTokenMustBeThePathsUserAndTheBodyMustBeValid() async throws {
        let (harness, app) = try await makeApp()
        let uri = "\(Self.base)/alice/.replace-context"
        try await app.test(.router) { client in
            try await Self.create(client, path: "/public/a", context: "old-token")
            func expect(_ headers: HTTPFields, _ body: ByteBuffer, _ status: HTTPResponse.Status, _ code: String, uri: String = uri)
                async throws
            {
                try await client.execute(uri: uri, method: .post, headers: headers, body: body) { response in
                    XCTAssertEqual(response.status, status)
                    XCTAssertEqual(try V2.json(response)["status"] as? String, code)
                }
            }
            let body = Self.replacement(old: "old-token", new: "new-token")
            try await expect([:], body, .unauthorized, "unauthorized")
            try await expect([.authorization: "Bearer \(V2.token(uid: "alice", exp: 1000))"], body, .unauthorized, "unauthorized")
            try await expect(V2.headers("mallory"), body, .forbidden, "permission_denied")
            try await expect(V2.headers(), body, .notFound, "namespace_does_not_exist", uri: "/datasync/v2/nope/subscriptions/alice/.replace-context")
            for bad in [
                V2.body(["oldContext": .string("old-token"), "newContext": .string("new-token")]),
                V2.body(["kind": .string("pager"), "oldContext": .string("old-token"), "newContext": .string("new-token")]),
                V2.body(["kind": .string("mobile"), "oldContext": .string("old-token")]),
                V2.body(["kind": .string("mobile"), "oldContext": .string(""), "newContext": .string("new-token")]),
                V2.body(["kind": .string("mobile"), "oldContext": .string("old-token"), "newContext": .number("1")]),
                V2.body(["kind": .string("mobile"), "oldContext": .string("old-token"), "newContext": .string("new token")]),
                ByteBuffer(string: "not json"),
            ] {
                try await expect(V2.headers(), bad, .badRequest, "bad_request")
            }
            // The same token twice: nothing to move, nothing removed.
            let same = try await Self.replace(client, old: "old-token", new: "old-token")
            XCTAssertEqual(same.subscriptions.map { $0["context"] as? String }, ["old-token"])
            XCTAssertEqual(same.moved, [:])
            // Another method on the endpoint: it is not a subscription id.
            try await client.execute(uri: uri, method: .get, headers: V2.headers()) { response in
                XCTAssertEqual(response.status, .notFound)
            }
        }
        XCTAssertEqual(harness.subscriptions("toto").map(\.subscriber.token), ["old-token"], "nothing refused changed anything")
    }
}
