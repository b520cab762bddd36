import XCTest

@testable import PushCore

final class V1PayloadTests: XCTestCase {
    func text(_ payload: DataPayload?) -> String? { payload.map { String(decoding: $0.jsonBytes(), as: UTF8.self) } }

    func testSeedExampleIsByteExact() throws {
        let value = try JSONParser.parse(#"{"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj"}"#)
        let payload = try XCTUnwrap(V1Payload.build(app: "toto", path: try DataPath("/some/webcom/path"), content: .value(value)))
        let expected = #"{"s":"OK","t":"value","app":"toto","sp":"/some/webcom/path","d":"{\"a\":\"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj\"}"}"#
        XCTAssertEqual(text(payload), expected)
        XCTAssertEqual(payload.jsonBytes().count, 114)
        XCTAssertEqual(payload.serializedSize, 114)
    }

    func testNoDataAndRevokeKeyOrder() throws {
        let path = try DataPath("/a/b")
        XCTAssertEqual(text(V1Payload.build(app: "toto", path: path, content: .noData)), #"{"t":"noData","app":"toto","sp":"/a/b"}"#)
        XCTAssertEqual(
            text(V1Payload.build(app: "toto", path: .root, content: .revoke(.expired))),
            #"{"t":"revoke","r":"expired","app":"toto","sp":"/"}"#)
        XCTAssertEqual(
            text(V1Payload.build(app: "x", path: path, content: .value(nil))), #"{"s":"NotLoaded","t":"value","app":"x","sp":"/a/b"}"#)
    }

    func testChildEventPayload() throws {
        let changes = ChildChanges(
            added: ["n": .object(["v": .number("1")])], removed: ["z", "b"], changed: ["c": .string("é\"")])
        XCTAssertEqual(
            text(V1Payload.build(app: "app", path: try DataPath("/p"), content: .childEvent(changes, keysOnly: false))),
            #"{"s":"OK","t":"childEvent","app":"app","sp":"/p","added":"{\"n\":{\"v\":1}}","removed":"[\"b\",\"z\"]","changed":"{\"c\":\"é\\\"\"}"}"#
        )
        XCTAssertEqual(
            text(V1Payload.build(app: "app", path: try DataPath("/p"), content: .childEvent(changes, keysOnly: true))),
            #"{"s":"OnlyKeys","t":"childEvent","app":"app","sp":"/p","added":"{\"n\":true}","removed":"[\"b\",\"z\"]","changed":"{\"c\":true}"}"#
        )
    }

    /// A `value` payload whose full form is exactly `size` bytes, with a string value of `unit` repeated.
    func valuePayload(size: Int, unit: String = "x") throws -> (DataPayload?, Int) {
        let path = try DataPath("/p")
        let empty = try XCTUnwrap(V1Payload.build(app: "a", path: path, content: .value(.string(""))))
        let unitBytes = unit.utf8.count
        let count = (size - empty.serializedSize) / unitBytes
        XCTAssertEqual((size - empty.serializedSize) % unitBytes, 0)
        let value = JSONValue.string(String(repeating: unit, count: count))
        let full = DataPayload([.init("s", "OK"), .init("t", "value"), .init("app", "a"), .init("sp", "/p"), .init("d", JSONWriter.string(value))])
        return (V1Payload.build(app: "a", path: path, content: .value(value)), full.serializedSize)
    }

    func testValueSizeBoundary4063And4064() throws {
        let (ok, okSize) = try valuePayload(size: 4063)
        XCTAssertEqual(okSize, 4063)
        XCTAssertEqual(ok?["s"], "OK")
        XCTAssertEqual(ok?.jsonBytes().count, 4063)
        let (big, bigSize) = try valuePayload(size: 4064)
        XCTAssertEqual(bigSize, 4064)
        XCTAssertEqual(text(big), #"{"s":"TooBig","t":"value","app":"a","sp":"/p"}"#)
    }

    func testValueSizeIsCountedInUTF8Bytes() throws {
        // 'é' is 2 bytes: the 4064 boundary is on bytes, not characters.
        let path = try DataPath("/p")
        let empty = try XCTUnwrap(V1Payload.build(app: "a", path: path, content: .value(.string("")))).serializedSize
        let pairs = (4063 - empty) / 2
        let padding = (4063 - empty) % 2 == 1 ? "x" : ""
        let at4063 = JSONValue.string(String(repeating: "é", count: pairs) + padding)
        let ok = try XCTUnwrap(V1Payload.build(app: "a", path: path, content: .value(at4063)))
        XCTAssertEqual(ok["s"], "OK")
        XCTAssertEqual(ok.jsonBytes().count, 4063)
        XCTAssertEqual(ok.serializedSize, 4063)
        // One more byte (an 'x' becomes 'é', or an 'x' is added) crosses it.
        let at4064 = JSONValue.string(String(repeating: "é", count: pairs) + (padding.isEmpty ? "x" : "é"))
        XCTAssertEqual(V1Payload.build(app: "a", path: path, content: .value(at4064))?["s"], "TooBig")
        // Characters alone would have stayed under the limit.
        XCTAssertLessThan(pairs + 1, 4064 - empty)
        let euros = JSONValue.string(String(repeating: "€", count: 1000))
        XCTAssertEqual(V1Payload.build(app: "a", path: path, content: .value(euros))?.serializedSize, empty + 3000)
    }

    func testChildEventDegradesToOnlyKeysThenTooBig() throws {
        let path = try DataPath("/p")
        let bigValue = JSONValue.string(String(repeating: "v", count: 5000))
        let onlyKeys = V1Payload.build(app: "a", path: path, content: .childEvent(ChildChanges(added: ["k": bigValue], changed: ["c": bigValue]), keysOnly: false))
        XCTAssertEqual(text(onlyKeys), #"{"s":"OnlyKeys","t":"childEvent","app":"a","sp":"/p","added":"{\"k\":true}","removed":"[]","changed":"{\"c\":true}"}"#)

        var many: [ExactString: JSONValue] = [:]
        for index in 0..<400 { many[ExactString("key\(index)")] = .number("1") }
        let tooBig = V1Payload.build(app: "a", path: path, content: .childEvent(ChildChanges(added: many), keysOnly: false))
        XCTAssertEqual(text(tooBig), #"{"s":"TooBig","t":"childEvent","app":"a","sp":"/p","added":"{}","removed":"[]","changed":"{}"}"#)
    }

    func testChildEventBoundaryAt4064() throws {
        let path = try DataPath("/p")
        func payload(_ length: Int) -> DataPayload? {
            V1Payload.build(app: "a", path: path, content: .childEvent(ChildChanges(added: ["k": .string(String(repeating: "v", count: length))]), keysOnly: false))
        }
        let base = try XCTUnwrap(payload(0)).serializedSize
        XCTAssertEqual(payload(4063 - base)?["s"], "OK")
        XCTAssertEqual(payload(4063 - base)?.serializedSize, 4063)
        XCTAssertEqual(payload(4064 - base)?["s"], "OnlyKeys")
    }

    func testWholePayloadLimit4093And4094() throws {
        // noData is never degraded: only the 4093-byte ceiling applies. Grow the app id to hit exact sizes.
        let path = try DataPath("/p")
        let base = try XCTUnwrap(V1Payload.build(app: "", path: path, content: .noData)).serializedSize
        let at4093 = V1Payload.build(app: String(repeating: "a", count: 4093 - base), path: path, content: .noData)
        XCTAssertEqual(at4093?.jsonBytes().count, 4093)
        XCTAssertNil(V1Payload.build(app: String(repeating: "a", count: 4094 - base), path: path, content: .noData))
    }

    func testWebPushsSmallerLimitMovesTheThresholdAndTheCeilingAlike() throws {
        XCTAssertEqual(SubscriberKind.webpush.maximumPayloadSize, 3993)
        XCTAssertEqual(SubscriberKind.mobile.maximumPayloadSize, 4093)
        XCTAssertEqual(DataPayload.degradeThreshold(forMaximum: 3993), 3964)
        let path = try DataPath("/p")
        func payload(_ length: Int, _ maximum: Int) -> DataPayload? {
            V1Payload.build(
                app: "a", path: path, content: .childEvent(ChildChanges(added: ["k": .string(String(repeating: "v", count: length))]), keysOnly: false),
                maximumSize: maximum)
        }
        let base = try XCTUnwrap(payload(0, 3993)).serializedSize
        XCTAssertEqual(payload(3963 - base, 3993)?["s"], "OK")
        XCTAssertEqual(payload(3964 - base, 3993)?["s"], "OnlyKeys")
        XCTAssertEqual(payload(3964 - base, 4093)?["s"], "OK")
        let noDataBase = try XCTUnwrap(V1Payload.build(app: "", path: path, content: .noData)).serializedSize
        XCTAssertNotNil(V1Payload.build(app: String(repeating: "a", count: 3993 - noDataBase), path: path, content: .noData, maximumSize: 3993))
        XCTAssertNil(V1Payload.build(app: String(repeating: "a", count: 3994 - noDataBase), path: path, content: .noData, maximumSize: 3993))
    }

    func testSerializedSizeMatchesBytesWithEscapes() {
        let payload = DataPayload([.init("k\"", "a\u{01}\n\\é😀")])
        XCTAssertEqual(payload.serializedSize, payload.jsonBytes().count)
    }
}
