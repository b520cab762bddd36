import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PushCore
import SSLCrypto
import XCTest

@testable import Gateway
@testable import GatewayAPI

final class V2RoutesTests: XCTestCase {
    static let secret = "a-test-secret-of-at-least-32-bytes!!"

    /// An HS256 token signed with ``secret`` (tokens from an independent library are in the e2e tests).
    static func token(uid: String, exp: Int64 = Int64(Date().timeIntervalSince1970) + 600, secret: String = secret) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let payload = Base64URL.encode(JSONWriter.bytes(.object(["uid": .string(uid), "exp": .number(String(exp))])))
        let input = Array("\(header).\(payload)".utf8)
        let signature = (try? HMACSHA256.authenticationCode(for: input, key: Array(secret.utf8))) ?? []
        return "\(header).\(payload).\(Base64URL.encode(signature))"
    }

    func makeApp() async throws -> (GatewayHarness, Application<RouterResponder<GatewayRequestContext>>) {
        var settings = AppSettings()
        settings.authKeys = [.object(["alg": .string("HS256"), "secret": .string(Self.secret)])]
        settings.rules = .object([
            "rules": .object([
                "public": .object([".read": .bool(true)]),
                "users": .object(["$uid": .object([".read": .string("auth != null && auth.uid == $uid")])]),
            ])
        ])
        settings.subscriptionTTLSeconds = 3600
        var off = settings
        off.enabled = false
        let harness = try GatewayHarness(apps: ["toto": settings, "off": off, "nokeys": AppSettings()])
        try await harness.start()
        addTeardownBlock { await harness.stop() }
        return (harness, Application(router: harness.router()))
    }

    static func body(_ fields: [ExactString: JSONValue]) -> ByteBuffer { ByteBuffer(bytes: JSONWriter.bytes(.object(fields))) }

    static let subscription: [ExactString: JSONValue] = [
        "kind": .string("mobile"), "mode": .string("value"), "path": .string("/users/alice/inbox"),
        "context": .string("fcm-token-1"),
    ]

    static func json(_ response: TestResponse) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
    }

    static func headers(_ uid: String = "alice") -> HTTPFields {
        [.authorization: "Bearer \(Self.token(uid: uid))", .contentType: "application/json"]
    }

    func testCreateConflictUpdateListGetDelete() async throws {
        let (store, app) = try await makeApp()
        let base = "/datasync/v2/toto/subscriptions/alice"
        try await app.test(.router) { client in
            var id = ""
            try await client.execute(uri: base, method: .post, headers: Self.headers(), body: Self.body(Self.subscription)) { response in
                XCTAssertEqual(response.status, .created)
                let document = try Self.json(response)
                id = try XCTUnwrap(document["id"] as? String)
                XCTAssertEqual(response.headers[.contentLocation], "\(base)/\(id)")
                XCTAssertEqual(document["path"] as? String, "/users/alice/inbox")
                XCTAssertEqual(document["format"] as? String, "v2")
                XCTAssertEqual(document["mode"] as? String, "value")
                let expiry = try XCTUnwrap(document["expirationTimestampSeconds"] as? Int)
                XCTAssertLessThanOrEqual(expiry, Int(Date().timeIntervalSince1970) + 3600)
            }
            // Same tuple: same id; without allowsUpdate it is a conflict.
            try await client.execute(uri: base, method: .post, headers: Self.headers(), body: Self.body(Self.subscription)) { response in
                XCTAssertEqual(response.status, .conflict)
                XCTAssertEqual(try Self.json(response)["status"] as? String, "already_exists")
            }
            var changed = Self.subscription
            changed["mode"] = .string("childEvent")
            changed["expirationTimestampSeconds"] = .number(String(Int64(Date().timeIntervalSince1970) + 60))
            try await client.execute(uri: base + "?allowsUpdate=true", method: .post, headers: Self.headers(), body: Self.body(changed)) {
                response in
                XCTAssertEqual(response.status, .ok)
                let document = try Self.json(response)
                XCTAssertEqual(document["id"] as? String, id)
                XCTAssertEqual(document["mode"] as? String, "childEvent")
            }
            // A second device of the same user: another id.
            var other = Self.subscription
            other["context"] = .string("fcm-token-2")
            other["kind"] = .string("huawei")
            try await client.execute(uri: base, method: .post, headers: Self.headers(), body: Self.body(other)) { response in
                XCTAssertEqual(response.status, .created)
                XCTAssertNotEqual(try Self.json(response)["id"] as? String, id)
            }
            try await client.execute(uri: base, method: .get, headers: Self.headers()) { response in
                XCTAssertEqual(response.status, .ok)
                let list = try XCTUnwrap(try Self.json(response)["subscriptions"] as? [[String: Any]])
                XCTAssertEqual(list.count, 2)
            }
            try await client.execute(uri: "\(base)/\(id)", method: .get, headers: Self.headers()) { response in
                XCTAssertEqual(response.status, .ok)
                XCTAssertEqual(try Self.json(response)["context"] as? String, "fcm-token-1")
            }
            // PUT updates the mode; changing the identity is refused.
            try await client.execute(
                uri: "\(base)/\(id)", method: .put, headers: Self.headers(), body: Self.body(["mode": .string("noData")])
            ) { response in
                XCTAssertEqual(response.status, .ok)
                XCTAssertEqual(try Self.json(response)["mode"] as? String, "noData")
            }
            try await client.execute(
                uri: "\(base)/\(id)", method: .put, headers: Self.headers(), body: Self.body(["path": .string("/public")])
            ) { response in
                XCTAssertEqual(response.status, .badRequest)
            }
            try await client.execute(uri: "\(base)/\(id)", method: .delete, headers: Self.headers()) { response in
                XCTAssertEqual(response.status, .noContent)
            }
            try await client.execute(uri: "\(base)/\(id)", method: .get, headers: Self.headers()) { response in
                XCTAssertEqual(response.status, .notFound)
            }
            try await client.execute(uri: "\(base)/\(id)", method: .delete, headers: Self.headers()) { response in
                XCTAssertEqual(response.status, .notFound)
            }
            // expirationTimestampSeconds 0 deletes.
            other["expirationTimestampSeconds"] = .number("0")
            try await client.execute(uri: base, method: .post, headers: Self.headers(), body: Self.body(other)) { response in
                XCTAssertEqual(response.status, .noContent)
            }
        }
        XCTAssertEqual(store.subscriptions("toto").count, 0)
    }

    func testIDIsADeterministicFunctionOfTheTuple() throws {
        let path = try DataPath("/a/b")
        // Pinned: Python's hashlib over the same length-prefixed parts gives this id.
        XCTAssertEqual(
            SubscriptionID.make(
                app: "toto", uid: "alice", kind: .mobile, path: try DataPath("/users/alice/inbox"), context: "fcm-token:APA91b\u{E9}"),
            "KNURYUlKpm31SWUy08Lh3g")
        let one = SubscriptionID.make(app: "toto", uid: "alice", kind: .mobile, path: path, context: "t")
        XCTAssertEqual(one, SubscriptionID.make(app: "toto", uid: "alice", kind: .mobile, path: path, context: "t"))
        XCTAssertEqual(one.count, 22)
        XCTAssertNotEqual(one, SubscriptionID.make(app: "toto", uid: "alice", kind: .huawei, path: path, context: "t"))
        XCTAssertNotEqual(one, SubscriptionID.make(app: "toto", uid: "alic", kind: .mobile, path: path, context: "et"))
        XCTAssertNotEqual(one, SubscriptionID.make(app: "toto", uid: "alice", kind: .mobile, path: try DataPath("/a"), context: "t"))
    }

    func testAuthenticationAndRules() async throws {
        let (_, app) = try await makeApp()
        let base = "/datasync/v2/toto/subscriptions/alice"
        let defaultBody = Self.body(Self.subscription)
        try await app.test(.router) { client in
            func expect(
                _ headers: HTTPFields, _ status: HTTPResponse.Status, _ code: String, uri: String = base, body: ByteBuffer? = nil
            ) async throws {
                let body = body ?? defaultBody
                try await client.execute(uri: uri, method: .post, headers: headers, body: body) { response in
                    XCTAssertEqual(response.status, status)
                    XCTAssertEqual(try Self.json(response)["status"] as? String, code)
                }
            }
            try await expect([:], .unauthorized, "unauthorized")
            try await expect([.authorization: "Basic abc"], .unauthorized, "unauthorized")
            try await expect([.authorization: "Bearer \(Self.token(uid: "alice", exp: 1000))"], .unauthorized, "unauthorized")
            try await expect([.authorization: "Bearer \(Self.token(uid: "alice", secret: "another-secret-of-32-bytes-length!!"))"], .unauthorized, "unauthorized")
            try await expect(Self.headers("bob"), .forbidden, "permission_denied")
            // Rules: bob may not read alice's data.
            try await expect(
                Self.headers("bob"), .forbidden, "permission_denied", uri: "/datasync/v2/toto/subscriptions/bob")
            var elsewhere = Self.subscription
            elsewhere["path"] = .string("/private")
            try await expect(Self.headers(), .forbidden, "permission_denied", body: Self.body(elsewhere))
            try await expect(Self.headers(), .forbidden, "disabled", uri: "/datasync/v2/off/subscriptions/alice")
            try await expect(Self.headers(), .notFound, "namespace_does_not_exist", uri: "/datasync/v2/nope/subscriptions/alice")
            try await expect(Self.headers(), .unauthorized, "unauthorized", uri: "/datasync/v2/nokeys/subscriptions/alice")
            for bad: [ExactString: JSONValue] in [
                ["kind": .string("webhook")], ["kind": .string("pager")], ["mode": .string("all")], ["path": .string("/a/.b")],
                ["context": .string("")], ["format": .string("v3")], ["expirationTimestampSeconds": .number("-1")],
                ["expirationTimestampSeconds": .number("1000")],
            ] {
                try await expect(Self.headers(), .badRequest, "bad_request", body: Self.body(Self.subscription.merging(bad) { $1 }))
            }
            try await client.execute(uri: base, method: .post, headers: Self.headers(), body: ByteBuffer(string: "not json")) { response in
                XCTAssertEqual(response.status, .badRequest)
            }
        }
    }

    func testV1TokenIsVerifiedAndRulesApply() async throws {
        let (_, app) = try await makeApp()
        try await app.test(.router) { client in
            try await client.execute(uri: "/base/toto/.wakeup/public/news?id=d1", method: .put) { response in
                XCTAssertEqual(response.status, .noContent)
            }
            try await client.execute(uri: "/base/toto/.wakeup/users/alice?id=d1", method: .put) { response in
                XCTAssertEqual(response.status, .forbidden)
            }
            try await client.execute(uri: "/base/toto/.wakeup/users/alice?id=d1&token=\(Self.token(uid: "alice"))", method: .put) {
                response in
                XCTAssertEqual(response.status, .noContent)
            }
            try await client.execute(uri: "/base/toto/.wakeup/users/alice?id=d1&token=forged.token.here", method: .put) { response in
                XCTAssertEqual(response.status, .unauthorized)
            }
        }
    }
}
