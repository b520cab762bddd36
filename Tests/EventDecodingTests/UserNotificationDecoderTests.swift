import EventDecoding
import PushCore
import PushProto
import XCTest

/// The user-notification decoder: the JSON form, the protobuf binary form, and the dead-letter reason of each natural mistake.
final class UserNotificationDecoderTests: XCTestCase {
    private let json = Array("application/json".utf8)

    private func decode(_ text: String, key: String? = "demo", contentType: [UInt8]? = Array("application/json".utf8))
        throws(ChangeEventError) -> UserNotification
    {
        try UserNotificationDecoder.decode(value: Array(text.utf8), contentType: contentType, key: key.map { Array($0.utf8) })
    }

    private func reason(_ text: String, key: String? = "demo", contentType: [UInt8]? = Array("application/json".utf8)) -> String {
        do {
            let decoded = try decode(text, key: key, contentType: contentType)
            XCTFail("decoded, expected a dead letter: \(decoded)")
            return ""
        } catch { return error.reason }
    }

    func testBothNameStylesAndDataAsObjectOrText() throws {
        let camel = try decode(
            #"{"appId":"demo","uid":"alice","data":{"b":1,"a":"x"},"eventId":"e1","collapseKey":"k","ttlSeconds":"60","timestampMs":5}"#)
        XCTAssertEqual(
            camel,
            UserNotification(
                app: "demo", uid: "alice",
                message: UserMessage(data: .object(["a": .string("x"), "b": .number("1")]), eventID: "e1", collapseKey: "k", ttlSeconds: 60),
                timestampMs: 5))
        let snake = try decode(#"{"app_id":"demo","uid":"alice","data":"{\"b\":1,\"a\":\"x\"}","event_id":"e1","collapse_key":"k","ttl_seconds":60,"timestamp_ms":"5"}"#)
        XCTAssertEqual(snake, camel)
        // No key: accepted (the pipeline warns once); null is an absent field.
        XCTAssertEqual(try decode(#"{"appId":"demo","uid":"u","data":{},"eventId":"e","collapseKey":null}"#, key: nil).message.collapseKey, nil)
    }

    func testDeadLetterReasons() {
        XCTAssertTrue(reason(#"{"appId":"demo","uid":"u","data":[1],"eventId":"e"}"#).hasPrefix("data: expected a JSON object, got an array"))
        XCTAssertTrue(reason(#"{"appId":"demo","uid":"u","data":"{nope","eventId":"e"}"#).hasPrefix("data: expected a JSON object or its JSON text"))
        XCTAssertTrue(reason(#"{"appId":"demo","data":{},"eventId":"e"}"#).hasPrefix("uid: missing"))
        XCTAssertTrue(reason(#"{"appId":"demo","uid":"u","eventId":"e"}"#).hasPrefix("data: missing"))
        XCTAssertTrue(reason(#"{"appId":"demo","uid":"u","data":{}}"#).hasPrefix("event_id: missing"))
        XCTAssertTrue(reason(#"{"uid":"u","data":{},"eventId":"e"}"#).hasPrefix("appId: missing"))
        XCTAssertTrue(reason(#"{"appId":"demo","uid":"u","data":{},"eventId":"e","ttlSeconds":1.5}"#).hasPrefix("ttlSeconds: expected an integer"))
        XCTAssertTrue(reason(#"{"appId":"demo","uid":"u","data":{},"eventId":"e","ttl":1}"#).hasPrefix(#""ttl": unknown field"#))
        XCTAssertTrue(reason(#"{"appId":"demo","app_id":"demo","uid":"u","data":{},"eventId":"e"}"#).contains("given twice"))
        XCTAssertTrue(reason(#"{"appId":"other","uid":"u","data":{},"eventId":"e"}"#).hasPrefix("record key: expected the app id"))
        XCTAssertTrue(reason("[1]").hasPrefix("undecodable record (application/json)"))
        XCTAssertTrue(
            reason("{", contentType: nil).hasPrefix(
                "undecodable record (protobuf): the value is JSON but the record has no content-type header; a JSON user notification needs"))
    }

    // MARK: Protobuf binary form (no content-type header)

    private func protobuf(_ build: (inout Pushgateway_V1_UserNotification) -> Void = { _ in }) throws -> [UInt8] {
        var message = Pushgateway_V1_UserNotification()
        message.appID = "demo"
        message.uid = "alice"
        message.data = #"{"b":1,"a":"x"}"#
        message.eventID = "e1"
        build(&message)
        return try message.serializedBytes()
    }

    private func binaryReason(_ value: [UInt8], contentType: String? = nil, key: String? = "demo") -> String {
        do {
            let decoded = try UserNotificationDecoder.decode(
                value: value, contentType: contentType.map { Array($0.utf8) }, key: key.map { Array($0.utf8) })
            XCTFail("decoded, expected a dead letter: \(decoded)")
            return ""
        } catch { return error.reason }
    }

    func testProtobufBinaryFormDecodesAsTheJSONForm() throws {
        let value = try protobuf {
            $0.collapseKey = "k"
            $0.ttlSeconds = 60
            $0.timestampMs = 5
        }
        let decoded = try UserNotificationDecoder.decode(value: value, contentType: nil, key: Array("demo".utf8))
        XCTAssertEqual(
            decoded,
            try decode(#"{"appId":"demo","uid":"alice","data":{"b":1,"a":"x"},"eventId":"e1","collapseKey":"k","ttlSeconds":60,"timestampMs":5}"#))
        // A content-type other than JSON is still protobuf; no key is accepted.
        XCTAssertEqual(try UserNotificationDecoder.decode(value: value, contentType: Array("application/x-protobuf".utf8), key: nil), decoded)
        // proto3 optional: absent is none; present as 0 is a TTL of 0.
        let plain = try UserNotificationDecoder.decode(value: try protobuf(), contentType: nil, key: nil)
        XCTAssertNil(plain.message.collapseKey)
        XCTAssertNil(plain.message.ttlSeconds)
        let zero = try UserNotificationDecoder.decode(value: try protobuf { $0.ttlSeconds = 0 }, contentType: nil, key: nil)
        XCTAssertEqual(zero.message.ttlSeconds, 0)
    }

    func testEncodeRoundTripsInBothForms() throws {
        for json in [false, true] {
            let value = try UserNotificationDecoder.encode(
                app: "demo", uid: "alice", data: #"{"a":"x"}"#, collapseKey: "k", ttlSeconds: 0, eventID: "e1", timestampMs: 5, json: json)
            let decoded = try UserNotificationDecoder.decode(value: value, contentType: json ? self.json : nil, key: Array("demo".utf8))
            XCTAssertEqual(
                decoded,
                UserNotification(
                    app: "demo", uid: "alice", message: UserMessage(data: .object(["a": .string("x")]), eventID: "e1", collapseKey: "k", ttlSeconds: 0),
                    timestampMs: 5), "json: \(json)")
        }
    }

    func testProtobufBinaryFormDeadLetterReasons() throws {
        let good = try protobuf { $0.collapseKey = "room-1" }
        // Truncated in the middle of a field: the bytes do not decode.
        XCTAssertTrue(
            binaryReason(Array(good.prefix(good.count - 3))).hasPrefix(
                "undecodable record (protobuf): expected a protobuf pushgateway.v1.UserNotification (proto/pushgateway/v1/user_notification.proto), got bytes that do not decode"
            ), binaryReason(Array(good.prefix(good.count - 3))))
        XCTAssertTrue(binaryReason([]).hasPrefix("undecodable record (protobuf): the value is empty; expected a pushgateway.v1.UserNotification"))
        XCTAssertTrue(binaryReason(try protobuf { $0.uid = "" }).hasPrefix("uid: missing"))
        XCTAssertTrue(binaryReason(try protobuf { $0.data = "" }).hasPrefix("data: missing"))
        XCTAssertTrue(binaryReason(try protobuf { $0.eventID = "" }).hasPrefix("event_id: missing"))
        XCTAssertTrue(binaryReason(try protobuf { $0.appID = "" }).hasPrefix("app_id: missing"))
        XCTAssertTrue(binaryReason(try protobuf { $0.data = "[1]" }).hasPrefix("data: expected a JSON object, got an array"))
        XCTAssertTrue(binaryReason(try protobuf { $0.data = "{nope" }).hasPrefix("data: expected a JSON object or its JSON text"))
        XCTAssertTrue(binaryReason(try protobuf { $0.collapseKey = "" }).hasPrefix("collapse_key: empty"))
        XCTAssertTrue(binaryReason(try protobuf { $0.ttlSeconds = -1 }).hasPrefix("ttl_seconds: expected 0 to 2419200"))
        XCTAssertTrue(binaryReason(try protobuf(), key: "other").hasPrefix(#"record key: expected the app id "demo" (the event's app_id), got "other""#))
        // A change event's bytes published here: read as far as they go (its path lands in uid; its op, a varint where
        // data is a string, is kept as an unknown field by SwiftProtobuf), then refused for what is missing.
        var change = Pushgateway_V1_ChangeEvent()
        change.appID = "demo"
        change.path = "/chat"
        change.op = .set
        let misplaced = binaryReason(try change.serializedBytes())
        XCTAssertTrue(misplaced.hasPrefix("event_id: missing"), misplaced)
    }
}
