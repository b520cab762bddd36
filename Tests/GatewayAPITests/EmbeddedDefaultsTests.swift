import Auth
import Foundation
import PushCore
import XCTest

@testable import Gateway
@testable import GatewayEmbedded

/// The embedded defaults' pure parts: the stand-in upstream's database, demo tokens, the banner, the
/// configuration of the broker port.
final class EmbeddedDefaultsTests: XCTestCase {
    private func event(_ op: ChangeEvent.Operation, _ path: String, _ after: String? = nil, app: String = "demo") throws -> ChangeEvent {
        try ChangeEvent.validated(app: app, path: path, operation: op.rawValue, after: after, before: nil, eventID: "", timestampMs: 0)
    }

    private func json(_ text: String) throws -> JSONValue { try JSONParser.parse(text) }

    func testEmbeddedDatabaseFollowsTheWritesAndIgnoresSnapshots() throws {
        var database = EmbeddedDatabase()
        try database.apply(event(.set, "/chat", #"{"a":1,"b":{"x":true}}"#))
        try database.apply(event(.set, "/chat/c", #""new""#))
        try database.apply(event(.merge, "/chat", #"{"a":null,"d":[1,2]}"#))
        try database.apply(event(.set, "/other", "1", app: "other"))
        XCTAssertEqual(database.value(app: "demo", at: try DataPath("/chat")), try json(#"{"b":{"x":true},"c":"new","d":[1,2]}"#))
        // A SNAPSHOT is not a write: a late one must not undo the writes published after it was taken.
        try database.apply(event(.snapshot, "/chat", #"{"stale":true}"#))
        XCTAssertEqual(database.value(app: "demo", at: try DataPath("/chat/b/x")), .bool(true))
        try database.apply(event(.remove, "/chat/b"))
        XCTAssertEqual(database.value(app: "demo", at: try DataPath("/chat/b")), .null)
        try database.apply(event(.namespaceDeleted, "/"))
        XCTAssertEqual(database.value(app: "demo", at: .root), .null)
        XCTAssertEqual(database.value(app: "other", at: try DataPath("/other")), .number("1"), "other apps are untouched")
    }

    func testDemoTokenVerifiesWithTheDemoAppsKey() throws {
        let now = Date()
        let token = try DemoToken.mint(uid: "al\"ice", lifetimeSeconds: 90, now: now)
        let verifier = JWTVerifier(keys: try AppSettings.demo.authKeys.map { try AuthKey.parse($0) }, leewaySeconds: 0)
        let verified = try verifier.verify(token, now: Int64(now.timeIntervalSince1970))
        XCTAssertEqual(verified.uid, "al\"ice")
        XCTAssertEqual(verified.expiresAt, Int64(now.timeIntervalSince1970) + 90)
        XCTAssertThrowsError(try verifier.verify(token, now: Int64(now.timeIntervalSince1970) + 91), "expired")
    }

    func testLifetimes() {
        XCTAssertEqual(DemoToken.lifetimeSeconds("3600"), 3600)
        XCTAssertEqual(DemoToken.lifetimeSeconds("90m"), 5400)
        XCTAssertEqual(DemoToken.lifetimeSeconds("24h"), 86_400)
        XCTAssertEqual(DemoToken.lifetimeSeconds("7d"), 604_800)
        for bad in ["", "h", "-5", "0", "1.5h", "5w", "٣h", "99999999999999999999d"] {
            XCTAssertNil(DemoToken.lifetimeSeconds(bad), bad)
        }
    }

    func testBannerCommandsUseTheGivenBinaryAndPorts() {
        let text = GettingStarted.text(
            .init(host: "127.0.0.1", port: 8080, app: "demo", brokers: "127.0.0.1:9092", changesTopic: "datasync.changes",
                  deadLetterTopic: "push.dlq"),
            binary: "/opt/pg/push-gateway")
        XCTAssertTrue(text.contains("/opt/pg/push-gateway publish --brokers 127.0.0.1:9092 --app demo"), text)
        XCTAssertTrue(text.contains("kcat -P -b 127.0.0.1:9092 -t datasync.changes -k demo -H content-type=application/json"), text)
        XCTAssertTrue(text.contains("kcat -C -b 127.0.0.1:9092 -t push.dlq"), text)
        XCTAssertTrue(text.contains("a restart starts with no subscriptions and empty topics"), text)
        XCTAssertTrue(text.contains("/opt/pg/push-gateway demo-token"), text)
        XCTAssertEqual(GettingStarted.shellQuoted("/a b/it's"), #"'/a b/it'\''s'"#)
        XCTAssertEqual(GettingStarted.shellQuoted("/usr/local/bin/push-gateway"), "/usr/local/bin/push-gateway")
    }

    func testEmbeddedBrokerPortConfiguration() throws {
        XCTAssertEqual(try GatewayConfiguration.load(file: nil, environment: [:]).kafka.embeddedBrokerPort, 9092)
        XCTAssertEqual(
            try GatewayConfiguration.load(file: nil, environment: ["PUSH_KAFKA_EMBEDDED_BROKER_PORT": "0"]).kafka.embeddedBrokerPort, 0)
        XCTAssertThrowsError(try GatewayConfiguration.load(file: nil, environment: ["PUSH_KAFKA_EMBEDDED_BROKER_PORT": "70000"]))
        XCTAssertThrowsError(try GatewayConfiguration.load(file: nil, environment: ["PUSH_KAFKA_EMBEDDED_BROKER_PORT": "x"]))
    }
}
