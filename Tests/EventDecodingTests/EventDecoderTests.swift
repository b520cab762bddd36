import EventDecoding
import PushCore
import PushProto
import XCTest

/// The change-event decoder: the JSON form people write (values for `after`, `op` in any case) and the
/// dead-letter reason of each natural publisher mistake (docs/PUBLISHING.md, "Dead letters").
final class EventDecoderTests: XCTestCase {
    private let json = Array("application/json".utf8)

    private func decodeJSON(_ text: String, key: String? = "demo") throws(ChangeEventError) -> ChangeEvent {
        try EventDecoder.decode(value: Array(text.utf8), contentType: json, key: key.map { Array($0.utf8) })
    }

    /// The dead-letter reason of a JSON record (fails the test when it decodes).
    private func reason(_ text: String, key: String? = "demo", file: StaticString = #filePath, line: UInt = #line) -> String {
        do {
            let event = try decodeJSON(text, key: key)
            XCTFail("decoded, expected a dead letter: \(event)", file: file, line: line)
            return ""
        } catch {
            return error.reason
        }
    }

    private func protobuf(_ build: (inout Pushgateway_V1_ChangeEvent) -> Void) throws -> [UInt8] {
        var message = Pushgateway_V1_ChangeEvent()
        message.appID = "demo"
        message.path = "/chat"
        message.op = .set
        build(&message)
        return try message.serializedBytes()
    }

    private func protobufReason(_ value: [UInt8], contentType: String? = nil, key: String? = "demo") -> String {
        do {
            let event = try EventDecoder.decode(
                value: value, contentType: contentType.map { Array($0.utf8) }, key: key.map { Array($0.utf8) })
            XCTFail("decoded, expected a dead letter: \(event)")
            return ""
        } catch {
            return error.reason
        }
    }

    // MARK: - A JSON form people can write

    func testAfterAsAJSONValueEqualsAfterAsJSONText() throws {
        let documents = [
            #"{"m":"obj","n":1.50,"e":1E3,"l":[1,null,{"x":true}],"u":"\u00e9\/"}"#, "[1,2,3]", "42", "-0.0", "true",
        ]
        for document in documents {
            var quoted: [UInt8] = []
            JSONWriter.writeString(document, into: &quoted)
            let text = try decodeJSON(#"{"appId":"demo","path":"/chat","op":"SET","after":\#(String(decoding: quoted, as: UTF8.self))}"#)
            let value = try decodeJSON(#"{"appId":"demo","path":"/chat","op":"SET","after":\#(document)}"#)
            XCTAssertEqual(text, value, document)
            XCTAssertEqual(JSONWriter.string(text.after), JSONWriter.string(value.after), document)
        }
        // A string is always JSON text: the string value hi is the JSON text "hi".
        XCTAssertEqual(try decodeJSON(#"{"appId":"demo","path":"/c","op":"SET","after":"\"hi\""}"#).after, .string("hi"))
        let event = try decodeJSON(#"{"appId":"demo","path":"/chat","op":"SET","after":{"n":1.50}}"#)
        XCTAssertEqual(JSONWriter.string(event.after), #"{"n":1.50}"#, "number lexemes are kept")
    }

    func testBeforeAsAJSONValue() throws {
        let event = try decodeJSON(#"{"appId":"demo","path":"/c","op":"SET","after":{"a":2},"before":{"a":1}}"#)
        XCTAssertEqual(event.before, .object(["a": .number("1")]))
    }

    func testOpInAnyCaseAndByNumber() throws {
        for op in ["set", "Set", "SET", "1"] {
            let value = op == "1" ? "1" : #""\#(op)""#
            XCTAssertEqual(try decodeJSON(#"{"appId":"demo","path":"/c","op":\#(value),"after":1}"#).operation, .set, op)
        }
        XCTAssertEqual(try decodeJSON(#"{"appId":"demo","path":"/c","op":"namespace_deleted"}"#).operation, .namespaceDeleted)
        XCTAssertEqual(try decodeJSON(#"{"appId":"demo","path":"/c","op":"remove"}"#).operation, .remove)
    }

    func testProtoFieldNamesTimestampAndNulls() throws {
        let event = try decodeJSON(
            #"{"app_id":"demo","path":"/c","op":"merge","after":{"x":null,"y":1},"event_id":"e1","timestamp_ms":"1700000000000","before":null}"#)
        XCTAssertEqual(event.app, "demo")
        XCTAssertEqual(event.eventID, "e1")
        XCTAssertEqual(event.timestampMs, 1_700_000_000_000)
        XCTAssertNil(event.before)
        XCTAssertEqual(try decodeJSON(#"{"appId":"demo","path":"/c","op":"SET","timestampMs":12}"#).timestampMs, 12)
        XCTAssertEqual(try decodeJSON(#"{"appId":"demo","path":"/c","op":"SET","after":null}"#).after, .null)
    }

    func testTheStrictProtobufJSONMappingStillDecodes() throws {
        let value = try EventDecoder.encode(
            app: "demo", path: "/chat", operation: .merge, after: #"{"a":1}"#, before: nil, eventID: "e", timestampMs: 5, json: true)
        let event = try EventDecoder.decode(value: value, contentType: json, key: Array("demo".utf8))
        XCTAssertEqual(event.operation, .merge)
        XCTAssertEqual(event.after, .object(["a": .number("1")]))
        XCTAssertEqual(event.timestampMs, 5)
    }

    func testAbsentKeyIsAcceptedByTheDecoder() throws {
        // Delivered; the pipeline logs that the key is missing (docs/PUBLISHING.md).
        XCTAssertEqual(try decodeJSON(#"{"appId":"demo","path":"/c","op":"SET","after":1}"#, key: nil).app, "demo")
    }

    // MARK: - Each natural mistake, its reason

    func testJSONMistakes() {
        let cases: [(String, String)] = [
            (#"{"appId":"demo","path":"/c","op":"SET","after":"hello"}"#,
             #"after: expected a JSON value or JSON text, got the string "hello", which is not JSON text"#),
            (#"{"appId":"demo","path":"/c","op":"FROBNICATE","after":1}"#,
             #"op: expected SET, MERGE, REMOVE, SNAPSHOT or NAMESPACE_DELETED (in any case), got "FROBNICATE""#),
            (#"{"appId":"demo","path":"/c","op":9}"#, "op: expected SET, MERGE, REMOVE, SNAPSHOT or NAMESPACE_DELETED (or their numbers 1 to 5), got the number 9"),
            (#"{"appId":"demo","path":"/c","op":true}"#, "op: expected SET, MERGE, REMOVE, SNAPSHOT or NAMESPACE_DELETED, got a boolean"),
            (#"{"appId":"demo","path":"/c","after":1}"#, "op: missing; expected SET, MERGE, REMOVE, SNAPSHOT or NAMESPACE_DELETED"),
            (#"{"path":"/c","op":"SET","after":1}"#, "appId: missing; expected the app id (the same as the record key)"),
            (#"{"app_id":"","path":"/c","op":"SET","after":1}"#, "app_id: missing; expected the app id"),
            (#"{"appId":"demo","op":"SET","after":1}"#, #"path: missing; expected the path of the write"#),
            (#"{"appId":"demo","path":"/a/b.c","op":"SET","after":1}"#,
             #"path: expected a "/"-separated path such as /chat/m1 ("/" is the root), got "/a/b.c": path key 'b.c' holds a forbidden character"#),
            (#"{"appId":"demo","path":7,"op":"SET"}"#, "path: expected a string, got the number 7"),
            (#"{"appId":"other","path":"/c","op":"SET","after":1}"#, #"record key: expected the app id "other" (the event's appId), got "demo""#),
            (#"{"app":"demo","path":"/c","op":"SET","after":1}"#,
             #""app": unknown field; expected appId, path, op, after, before, eventId, timestampMs"#),
            (#"{"appID":"demo","path":"/c","op":"SET","after":1}"#, #""appID": unknown field; did you mean appId?"#),
            (#"{"appId":"demo","app_id":"demo","path":"/c","op":"SET"}"#, "app_id: given twice (also as appId)"),
            (#"{"appId":"demo","path":"/c","op":"MERGE","after":"\"x\""}"#,
             #"after: MERGE expects an object of the children to set, got the string "x""#),
            (#"{"appId":"demo","path":"/c","op":"MERGE","after":{"a/b":1}}"#, #"after: MERGE expects child keys, got "a/b", which contains '/'"#),
            (#"{"appId":"demo","path":"/c","op":"MERGE","after":{"a.b":1}}"#, #"after: MERGE expects valid child keys, got "a.b""#),
            (#"{"appId":"demo","path":"/c","op":"SET","timestampMs":"yesterday"}"#,
             #"timestampMs: expected milliseconds since the epoch as an integer (such as 1700000000000), got the string "yesterday""#),
            (#"{"appId":"demo","path":"/c","op":"SET","timestampMs":1.5}"#, "timestampMs: expected milliseconds since the epoch as an integer"),
            (#"[{"appId":"demo"}]"#, "undecodable record (application/json): expected a JSON object (the JSON form of pushgateway.v1.ChangeEvent), got an array"),
            (#"{"appId":"demo","path":"#, "undecodable record (application/json): expected a JSON object (the JSON form of pushgateway.v1.ChangeEvent), got invalid JSON at byte"),
        ]
        for (document, expected) in cases {
            let got = reason(document)
            XCTAssertTrue(got.hasPrefix(expected), "\(document)\n  expected: \(expected)…\n  got:      \(got)")
        }
    }

    func testJSONWithoutTheContentTypeHeader() {
        let value = Array(#"{"appId":"demo","path":"/chat","op":"SET","after":{"m":"hi"}}"#.utf8)
        let expected = "undecodable record (protobuf): the value is JSON but the record has no content-type header; a JSON event needs the record header content-type: application/json"
        XCTAssertTrue(protobufReason(value).hasPrefix(expected), protobufReason(value))
        XCTAssertTrue(protobufReason(Array("  \n".utf8) + value).hasPrefix(expected), protobufReason(Array("  \n".utf8) + value))
        let other = protobufReason(value, contentType: "text/plain")
        XCTAssertTrue(
            other.hasPrefix(#"undecodable record (protobuf, content-type "text/plain"): the value is JSON but its content-type is "text/plain""#),
            other)
    }

    func testProtobufMistakes() throws {
        XCTAssertTrue(
            protobufReason(Array("\u{08}\u{96}\u{01}\u{FF}garbage".utf8)).hasPrefix(
                "undecodable record (protobuf): expected a protobuf pushgateway.v1.ChangeEvent (proto/pushgateway/v1/change_event.proto), got bytes that do not decode"))
        XCTAssertTrue(protobufReason([]).hasPrefix("undecodable record (protobuf): the value is empty"))
        XCTAssertEqual(
            protobufReason(try protobuf { $0.op = .unspecified }),
            "op: missing (OP_UNSPECIFIED); expected SET, MERGE, REMOVE, SNAPSHOT or NAMESPACE_DELETED")
        XCTAssertEqual(
            protobufReason(try protobuf { $0.op = .UNRECOGNIZED(9) }),
            "op: expected SET (1), MERGE (2), REMOVE (3), SNAPSHOT (4) or NAMESPACE_DELETED (5), got the number 9")
        let truncated = "{\"m\":"
        let badAfter = protobufReason(try protobuf { $0.after = truncated })
        XCTAssertTrue(
            badAfter.hasPrefix(#"after: expected JSON text (such as {"m":"hi"}, 42 or "\"hi\""), got "{\"m\":": invalid JSON at byte"#),
            badAfter)
        XCTAssertTrue(protobufReason(try protobuf { $0.before = "nope" }).hasPrefix("before: expected JSON text"))
        XCTAssertTrue(protobufReason(try protobuf { $0.appID = "" }).hasPrefix("app_id: missing"))
        XCTAssertEqual(
            protobufReason(try protobuf { _ in }, key: "other"),
            #"record key: expected the app id "demo" (the event's app_id), got "other""#)
        let ok = try EventDecoder.decode(value: try protobuf { $0.after = #"{"m":"hi"}"# }, contentType: nil, key: nil)
        XCTAssertEqual(ok.after, .object(["m": .string("hi")]))
    }

    func testLongTextIsCutInReasons() {
        let long = String(repeating: "x", count: 500)
        let got = reason(#"{"appId":"demo","path":"/c","op":"\#(long)"}"#)
        XCTAssertLessThan(got.count, 200, got)
        XCTAssertTrue(got.contains("…"), got)
    }
}
