import CompactJSON
import XCTest

@testable import Providers

final class FCMMessageEncoderTests: XCTestCase {
    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    func testBodyIsExactlyTheDocumentedEnvelope() {
        let body = FCMMessageEncoder.encodeMessage(token: "tok-1", data: [("t", "noData"), ("app", "toto"), ("sp", "/a/b")])
        XCTAssertEqual(
            text(body),
            #"{"message":{"token":"tok-1","data":{"t":"noData","app":"toto","sp":"/a/b"},"android":{"priority":"high"},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1}}}}}"#)
    }

    func testDataKeepsOrderAndEscapesMinimally() {
        let data = FCMMessageEncoder.encodeData([
            ("z", "first"), ("a", #"{"a":"b\c"}"#), ("ctl", "\n\t\r\u{08}\u{0C}\u{01}\u{1F}\u{7F}"), ("ü", "é😀/"),
        ])
        XCTAssertEqual(
            text(data),
            #"{"z":"first","a":"{\"a\":\"b\\c\"}","ctl":"\n\t\r\b\f\u0001\u001f"# + "\u{7F}" + #"","ü":"é😀/"}"#)
    }

    func testSeedValuePayloadIs114Bytes() {
        // SPEC §7: the seed's v1 value example is exactly 114 bytes.
        let data = FCMMessageEncoder.encodeData([
            ("s", "OK"), ("t", "value"), ("app", "toto"), ("sp", "/some/webcom/path"),
            ("d", #"{"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj"}"#),
        ])
        XCTAssertEqual(
            text(data),
            #"{"s":"OK","t":"value","app":"toto","sp":"/some/webcom/path","d":"{\"a\":\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\"}"}"#)
        XCTAssertEqual(data.count, 114)
    }

    func testPreEncodedDataIsEmbeddedVerbatim() {
        let data = FCMMessageEncoder.encodeData([("k", "v")])
        XCTAssertEqual(
            FCMMessageEncoder.encodeMessage(token: "t\"x", dataJSON: data),
            FCMMessageEncoder.encodeMessage(token: "t\"x", data: [("k", "v")]))
        XCTAssertTrue(text(FCMMessageEncoder.encodeMessage(token: "t\"x", dataJSON: data)).hasPrefix(#"{"message":{"token":"t\"x","data":{"k":"v"},"#))
    }

    func testValidateOnlyBodyIsTheSameMessageMarkedAsADryRun() {
        let data = FCMMessageEncoder.encodeData([("k", "v")])
        let real = text(FCMMessageEncoder.encodeMessage(token: "t", dataJSON: data))
        let dryRun = text(FCMMessageEncoder.encodeMessage(token: "t", dataJSON: data, validateOnly: true))
        XCTAssertEqual(dryRun, #"{"validate_only":true,"# + real.dropFirst())
    }

    func testEncodedDataParsesBackToTheSameStrings() throws {
        let pairs: [(key: String, value: String)] = [("a", "\u{00}\u{1}x\"\\/\u{2028}é"), ("", "")]
        let encoded = FCMMessageEncoder.encodeData(pairs)
        // Key order is kept in the bytes; the parsed object (unordered) holds the same strings.
        XCTAssertTrue(String(decoding: encoded, as: UTF8.self).hasPrefix(#"{"a":"#))
        guard case .object(let members) = try JSONParser.parse(encoded) else { return XCTFail("not an object") }
        XCTAssertEqual(members.count, pairs.count)
        for (key, value) in pairs { XCTAssertEqual(members[ExactString(key)], .string(value)) }
    }
}
