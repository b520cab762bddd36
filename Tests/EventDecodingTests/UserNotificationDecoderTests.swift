import EventDecoding
import PushCore
import XCTest

/// The user-notification decoder: the JSON form, and the dead-letter reason of each natural mistake.
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
        XCTAssertTrue(reason("{", contentType: nil).hasPrefix("undecodable record (no content-type header)"))
    }
}
