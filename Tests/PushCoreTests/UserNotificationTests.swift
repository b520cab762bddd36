import XCTest

@testable import PushCore

/// User notifications: their payloads (v1 and the v2 event, byte-exact), and who receives them
/// (``AppIndex/devices(ofUser:)``: each distinct token of the user once).
final class UserNotificationTests: XCTestCase {
    let message = UserMessage(data: .object(["title": .string("hé"), "n": .number("1")]), eventID: "evt-1")

    func testV1PayloadIsByteExactAndTooBigDropsTheData() throws {
        let payload = try XCTUnwrap(V1Payload.build(app: "toto", path: .root, content: .user(message)))
        XCTAssertEqual(
            String(decoding: payload.jsonBytes(), as: UTF8.self), #"{"s":"OK","t":"user","app":"toto","id":"evt-1","d":"{\"n\":1,\"title\":\"hé\"}"}"#)
        let big = UserMessage(data: .object(["x": .string(String(repeating: "a", count: 4100))]), eventID: "evt-2")
        let tooBig = try XCTUnwrap(V1Payload.build(app: "toto", path: .root, content: .user(big)))
        XCTAssertEqual(String(decoding: tooBig.jsonBytes(), as: UTF8.self), #"{"s":"TooBig","t":"user","app":"toto","id":"evt-2"}"#)
    }

    func testV2EventHasNoPathNorSubscriptionID() throws {
        let event = V2Event.bytes(app: "toto", path: try DataPath("/ignored"), subscriptionID: "sid", content: .user(message))
        XCTAssertEqual(String(decoding: event, as: UTF8.self), #"{"t":"u","a":"toto","v":{"n":1,"title":"hé"},"s":"OK","e":"evt-1"}"#)
        let cut = V2Event.bytes(app: "toto", path: .root, subscriptionID: "sid", content: .user(message), degrade: .tooBig)
        XCTAssertEqual(String(decoding: cut, as: UTF8.self), #"{"t":"u","a":"toto","s":"TooBig","e":"evt-1"}"#)
        XCTAssertEqual(V2Event.forms(for: .user(message)), [.full, .tooBig])
    }

    func testUserNotificationsAreNeverCoalesced() {
        XCTAssertEqual(NotificationContent.user(message).coalescing(with: .user(message)), .keepBoth)
    }

    func testDevicesOfAUserAreEachDistinctTokenOnceInTheBestFormat() throws {
        let index = AppIndex(app: "toto")
        func v2(_ path: String, _ token: String, _ uid: String, _ format: NotificationFormat = .v2, kind: SubscriberKind = .mobile) throws {
            index.subscribe(
                path: try DataPath(path), subscriber: SubscriberKey(kind: kind, token: token, uid: uid),
                settings: SubscriptionSettings(mode: .noData, format: format, expiresAt: 10_000, authUID: uid))
        }
        func v1(_ path: String, _ token: String, owner: String?) throws {
            index.subscribe(
                path: try DataPath(path), subscriber: SubscriberKey(token: token),
                settings: SubscriptionSettings(mode: .noData, expiresAt: 10_000, authUID: owner))
        }
        try v2("/a", "phone", "alice", .v1)
        try v2("/b", "phone", "alice")
        try v2("/c", "phone", "alice")
        try v2("/a", "tablet", "alice", .v1)
        try v2("/a", "phone", "alice", kind: .huawei)  // another destination: the same token string at HMS
        try v2("/a", "other", "bob")
        try v1("/x", "d1", owner: "alice")
        try v1("/y", "d1", owner: "alice")
        try v1("/x", "anonymous", owner: nil)
        try v1("/x", "tablet", owner: "alice")
        let devices = index.devices(ofUser: "alice")
        XCTAssertEqual(devices.map(\.subscriber.token), ["d1", "phone", "phone", "tablet"])
        XCTAssertEqual(devices.map(\.subscriber.kind), [.mobile, .huawei, .mobile, .mobile])
        // The phone gets v2 (one of its subscriptions asks for it), in that subscription's line (/b, the first v2 one).
        XCTAssertEqual(devices[2].path, try DataPath("/b"))
        XCTAssertEqual(devices[2].settings.format, .v2)
        XCTAssertEqual(devices[0].path, try DataPath("/x"))
        XCTAssertEqual(devices[3].settings.format, .v1)
        XCTAssertEqual(index.devices(ofUser: "bob").map(\.subscriber.token), ["other"])
        XCTAssertEqual(index.devices(ofUser: "nobody"), [])
    }

    func testValidationNamesTheField() {
        func reason(_ build: () throws(ChangeEventError) -> UserNotification) -> String {
            do {
                _ = try build()
                return ""
            } catch { return error.reason }
        }
        let data = JSONValue.object([:])
        XCTAssertTrue(reason { () throws(ChangeEventError) in
            try .validated(app: "a", uid: "", data: data, collapseKey: nil, ttlSeconds: nil, eventID: "e", timestampMs: 0)
        }.hasPrefix("uid: missing"))
        XCTAssertTrue(reason { () throws(ChangeEventError) in
            try .validated(app: "a", uid: "u", data: .array([]), collapseKey: nil, ttlSeconds: nil, eventID: "e", timestampMs: 0)
        }.hasPrefix("data: expected a JSON object"))
        XCTAssertTrue(reason { () throws(ChangeEventError) in
            try .validated(app: "a", uid: "u", data: data, collapseKey: nil, ttlSeconds: 2_419_201, eventID: "e", timestampMs: 0)
        }.hasPrefix("ttl_seconds: expected 0 to 2419200"))
        XCTAssertTrue(reason { () throws(ChangeEventError) in
            try .validated(app: "a", uid: "u", data: data, collapseKey: "", ttlSeconds: nil, eventID: "e", timestampMs: 0)
        }.hasPrefix("collapse_key: empty"))
        XCTAssertTrue(reason { () throws(ChangeEventError) in
            try .validated(app: "a", uid: "u", data: data, collapseKey: nil, ttlSeconds: nil, eventID: "", timestampMs: 0)
        }.hasPrefix("event_id: missing"))
    }
}
