import XCTest

@testable import PushCore

final class JSONTests: XCTestCase {
    func testRoundTripIsCompactSortedAndKeepsNumberLexemes() throws {
        let value = try JSONParser.parse(#"{ "b" : [1, 2.50, -0.1e+3, true, false, null], "a": {"y": "x", "x": 1} }"#)
        XCTAssertEqual(JSONWriter.string(value), #"{"a":{"x":1,"y":"x"},"b":[1,2.50,-0.1e+3,true,false,null]}"#)
    }

    func testStringEscapesAreMinimal() throws {
        let value = try JSONParser.parse(#""a\/b \"q\" \\ \n\t\u0001 é \u00e9 😀 \ud83d\ude00""#)
        XCTAssertEqual(JSONWriter.string(value), "\"a/b \\\"q\\\" \\\\ \\n\\t\\u0001 é é 😀 😀\"")
    }

    func testRejectsInvalidDocuments() {
        for text in ["", "{", "[1,]", "{\"a\":}", "01", "1.", "-", "tru", "\"\\x\"", "\"\u{01}\"", "{} x", "\"\\ud800\"", "[1 2]", "NaN"] {
            XCTAssertThrowsError(try JSONParser.parse(text), "accepted \(text)")
        }
    }

    func testDepthIsBounded() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        XCTAssertThrowsError(try JSONParser.parse(deep))
    }

    func testNormalizationRemovesNullsAndEmptyContainers() throws {
        let value = try JSONParser.parse(#"{"a":null,"b":{},"c":{"d":null},"e":[],"f":1}"#).normalized()
        XCTAssertEqual(JSONWriter.string(value), #"{"f":1}"#)
        XCTAssertEqual(try JSONParser.parse(#"{"a":null}"#).normalized(), .null)
    }

    func testSettingAndMerging() throws {
        let base = try JSONParser.parse(#"{"a":{"b":1,"c":2},"d":3}"#)
        XCTAssertEqual(JSONWriter.string(base.setting(.number("9"), at: ["a", "b"])), #"{"a":{"b":9,"c":2},"d":3}"#)
        XCTAssertEqual(JSONWriter.string(base.setting(.null, at: ["a", "b"])), #"{"a":{"c":2},"d":3}"#)
        XCTAssertEqual(JSONWriter.string(base.setting(.null, at: ["a"]).setting(.null, at: ["d"])), "null")
        XCTAssertEqual(JSONWriter.string(base.setting(.string("x"), at: ["n", "m"])), #"{"a":{"b":1,"c":2},"d":3,"n":{"m":"x"}}"#)
        let merged = base.merging(["a": .null, "e": .bool(true), "d": .number("4")])
        XCTAssertEqual(JSONWriter.string(merged), #"{"d":4,"e":true}"#)
        XCTAssertEqual(base.value(at: ["a", "c"]), .number("2"))
        XCTAssertEqual(base.value(at: ["a", "z", "q"]), .null)
    }

    func testArraysAreAddressedByIndex() throws {
        let value = try JSONParser.parse(#"{"l":["x","y"]}"#)
        XCTAssertEqual(value.value(at: ["l", "1"]), .string("y"))
        XCTAssertEqual(value.value(at: ["l", "01"]), .null)
        XCTAssertEqual(value.value(at: ["l", "2"]), .null)
    }
}
