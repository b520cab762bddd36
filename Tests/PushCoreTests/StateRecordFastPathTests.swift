import XCTest

@testable import PushCore

/// The fast path of the state record decoder (``CompactRecordScanner``) against the JSON decoder on the same
/// bytes: the same record, or the same error, for every record, and the fast path taken exactly for the compact
/// records the gateway writes.
final class StateRecordFastPathTests: XCTestCase {
    private let key = #"["demo","/users/u1","mobile","fcm-1:APA91bxxxx","u1"]"#
    private let value = #"{"expiresAt":1900000000,"format":"v1","mode":"noData"}"#

    /// Decodes `key`/`value` both ways; they must agree. Returns whether the fast path read it.
    @discardableResult
    private func check(_ key: [UInt8], _ value: [UInt8]?, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        let viaJSON = key.withUnsafeBufferPointer { key in
            withOptionalBuffer(value) { value in Result { () throws(SubscriptionRecord.DecodingError) in try SubscriptionRecord.decodeParsingJSON(key: key, value: value) } }
        }
        let decoded = Result { () throws(SubscriptionRecord.DecodingError) in try SubscriptionRecord.decode(key: key, value: value) }
        switch (viaJSON, decoded) {
        case (.success(let expected), .success(let actual)):
            XCTAssertEqual(actual, expected, file: file, line: line)
        case (.failure(let expected), .failure(let actual)):
            XCTAssertEqual(actual.description, expected.description, file: file, line: line)
        default:
            XCTFail("decoders disagree: JSON \(viaJSON), fast path \(decoded)", file: file, line: line)
        }
        // Through StateRecord (the store's entry point) too.
        let state = Result { () throws(SubscriptionRecord.DecodingError) in try StateRecord.decode(key: key, value: value) }
        switch (viaJSON, state) {
        case (.success(let expected), .success(.subscription(let actual))): XCTAssertEqual(actual, expected, file: file, line: line)
        case (.failure(let expected), .failure(let actual)): XCTAssertEqual(actual.description, expected.description, file: file, line: line)
        default: XCTFail("StateRecord disagrees: \(state)", file: file, line: line)
        }
        return key.withUnsafeBufferPointer { key in
            withOptionalBuffer(value) { value in CompactRecordScanner.subscription(key: key, value: value) != nil }
        }
    }

    private func check(_ key: String, _ value: String?, fast: Bool, file: StaticString = #filePath, line: UInt = #line) {
        let tookFastPath = check(Array(key.utf8), value.map { Array($0.utf8) }, file: file, line: line)
        XCTAssertEqual(tookFastPath, fast, "fast path taken", file: file, line: line)
    }

    func testRecordsTheGatewayWritesTakeTheFastPathAndDecodeAlike() throws {
        let settings: [SubscriptionSettings] = [
            SubscriptionSettings(mode: .noData, expiresAt: 1_900_000_000),
            SubscriptionSettings(mode: .value, format: .v2, expiresAt: 0, authUID: "alice"),
            SubscriptionSettings(mode: .childEvent, format: .v1, expiresAt: -5),
            SubscriptionSettings(mode: .value, format: .v2, expiresAt: Int64.max, authUID: ""),
            SubscriptionSettings(mode: .value, format: .v2, expiresAt: Int64.min, authUID: "é ü 漢"),
        ]
        let subscribers = [
            SubscriberKey(kind: .mobile, token: "fcm-1:APA91b" + String(repeating: "x", count: 140), uid: nil),
            SubscriberKey(kind: .huawei, token: "hms", uid: "u1"),
            SubscriberKey(kind: .mobile, token: "tök€n", uid: "ü"),
        ]
        for (number, settings) in settings.enumerated() {
            for subscriber in subscribers {
                let record = SubscriptionRecord(
                    app: "app\(number)", subscription: Subscription(path: try DataPath("/users/u\(number)/é"), subscriber: subscriber, settings: settings))
                XCTAssertTrue(check(record.key, record.value), "\(record)")
                // Its tombstone: no value, or an empty one.
                XCTAssertTrue(check(record.key, nil))
                XCTAssertTrue(check(record.key, []))
                XCTAssertEqual(try SubscriptionRecord.decode(key: record.key, value: record.value), record)
                XCTAssertNil(try SubscriptionRecord.decode(key: record.key, value: []).settings)
            }
        }
        check(key, value, fast: true)
        // Members in another order, authUID among them.
        check(key, #"{"mode":"value","authUID":"x","format":"v2","expiresAt":7}"#, fast: true)
        check(key, #"{"expiresAt":0,"format":"v1","mode":"noData"}"#, fast: true)
        check(key, #"{"expiresAt":-0,"format":"v1","mode":"noData"}"#, fast: true)
    }

    func testOtherFormsGoToTheJSONDecoder() throws {
        // Whitespace, escapes, and members the fast path does not read (decoded by the JSON decoder).
        check(#"[ "demo","/users/u1","mobile","t",""]"#, value, fast: false)
        check(#"["demo","/users/u1","mobile","t\"k",""]"#, value, fast: false)
        check(#"["d\u0065mo","/users/u1","mobile","t",""]"#, value, fast: false)
        check(key, #"{ "expiresAt":1,"format":"v1","mode":"noData"}"#, fast: false)
        check(key, #"{"expiresAt":1,"format":"v1","mode":"noData" }"#, fast: false)
        check(key, #"{"expiresAt":1,"format":"v1","mode":"noData","unknown":{"a":[1,2]}}"#, fast: false)
        check(key, #"{"expiresAt":1,"format":"v1","mode":"noData","authUID":7}"#, fast: false)
        check(key, #"{"expiresAt":1,"format":"v1","mode":"noData","authUID":null}"#, fast: false)
        check(key, #"{"expiresAt":1,"format":"v\u0031","mode":"noData"}"#, fast: false)
        check(key, #"{"expiresAt":1,"format":"v1","mode":"noData","revoked":"expired"}"#, fast: false)
        check(key, #"{"expiresAt":1,"filters":{"events":["added"],"keys":["a","b"]},"format":"v2","mode":"childEvent"}"#, fast: false)
        // A member named twice: the JSON decoder keeps the last one.
        check(key, #"{"expiresAt":1,"format":"v1","mode":"noData","mode":"value"}"#, fast: false)
        check(key, #"{"expiresAt":1,"expiresAt":2,"format":"v1","mode":"noData"}"#, fast: false)
    }

    func testInvalidRecordsFailAsBefore() throws {
        // Bad keys.
        for bad in [
            "", "[]", "[1]", #"["demo","/u","mobile","t"]"#, #"["demo","/u","mobile","t","",""]"#, #"["","/u","mobile","t",""]"#,
            #"["demo","/u","mobile","",""]"#, #"["demo","/u","pager","t",""]"#, #"["demo","/a//b","mobile","t",""]"#,
            #"["demo","/u","mobile","t",""]x"#, #"["demo","/u","mobile","t","""#, #"["demo","/u","mobile","t",1]"#, "null",
            #"["demo","/u","mobile","t\#u{01}",""]"#,
        ] {
            check(bad, value, fast: false)
            check(bad, nil, fast: false)
        }
        // Invalid UTF-8 in a key string.
        var invalid = Array(#"["demo","/u","mobile","t",""]"#.utf8)
        invalid[23] = 0xFF
        XCTAssertFalse(check(invalid, Array(value.utf8)))
        // Bad values.
        for bad in [
            "{}", "null", "[]", "{", #"{"expiresAt":1,"format":"v1"}"#, #"{"expiresAt":"1","format":"v1","mode":"noData"}"#,
            #"{"expiresAt":1.5,"format":"v1","mode":"noData"}"#, #"{"expiresAt":1e3,"format":"v1","mode":"noData"}"#,
            #"{"expiresAt":0123,"format":"v1","mode":"noData"}"#, #"{"expiresAt":-,"format":"v1","mode":"noData"}"#,
            #"{"expiresAt":9223372036854775808,"format":"v1","mode":"noData"}"#,
            #"{"expiresAt":-9223372036854775809,"format":"v1","mode":"noData"}"#,
            #"{"expiresAt":1,"format":"v9","mode":"noData"}"#, #"{"expiresAt":1,"format":"v1","mode":"loud"}"#,
            #"{"expiresAt":1,"format":"v1","mode":"noData"}x"#, #"{"expiresAt":1,"format":"v1","mode":"noData",}"#,
            #"{"expiresAt":1,"format":"v1","mode":"noData","revoked":"nonsense"}"#,
            #"{"expiresAt":1,"format":"v1","mode":"noData","filters":{"keys":[]}}"#,
        ] {
            check(key, bad, fast: false)
        }
    }
}
