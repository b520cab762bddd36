import XCTest

@testable import PushCore

final class RetryRecordTests: XCTestCase {
    func testRoundTripOfEveryContentKind() throws {
        let path = try DataPath("/a/b")
        let subscriber = SubscriberKey(kind: .huawei, token: "tok", uid: "alice")
        let contents: [NotificationContent] = [
            .noData, .value(.object(["x": .number("1.50")])), .value(nil), .value(.null),
            .childEvent(ChildChanges(added: ["k": .string("v")], removed: ["r"], changed: ["c": .bool(true)]), keysOnly: false),
            .childEvent(ChildChanges(added: ["k": .bool(true)]), keysOnly: true), .revoke(.tooBig),
            .user(UserMessage(data: .object(["m": .string("hi")]), eventID: "e1")),
            .user(UserMessage(data: .object([:]), eventID: "e2", collapseKey: "room", ttlSeconds: 60)),
        ]
        let entries = contents.enumerated().map { position, content in
            PendingNotification(
                app: "toto", path: path, subscriber: subscriber, format: position % 2 == 0 ? .v1 : .v2, content: content,
                scope: "toto", origin: "event-\(position)", firstFailureAt: 1_767_225_600.25, attempt: position,
                notBefore: 1_767_225_610.5)
        }
        let record = RetryRecord(key: RetryKey(app: "toto", path: path, subscriber: subscriber), entries: entries)
        let decoded = try XCTUnwrap(try RetryRecord.decode(key: record.recordKey, value: record.value))
        XCTAssertEqual(decoded, record)
        XCTAssertEqual(try StateRecord.decode(key: record.recordKey, value: record.value), .retry(record))
        XCTAssertEqual(
            String(decoding: record.recordKey, as: UTF8.self), #"["retry","toto","/a/b","huawei","tok","alice"]"#)
    }

    func testEmptyLineIsATombstoneAndBadRecordsAreErrors() throws {
        let key = RetryKey(app: "toto", path: try DataPath("/"), subscriber: SubscriberKey(token: "t"))
        let record = RetryRecord(key: key, entries: [])
        XCTAssertNil(record.value)
        XCTAssertEqual(try RetryRecord.decode(key: record.recordKey, value: nil), record)
        XCTAssertNil(try RetryRecord.decode(key: Array(#"["toto","/","mobile","t",""]"#.utf8), value: nil))
        XCTAssertThrowsError(try RetryRecord.decode(key: record.recordKey, value: Array("[{}]".utf8)))
        XCTAssertThrowsError(try RetryRecord.decode(key: Array(#"["retry",1,"/","mobile","t",""]"#.utf8), value: nil))
    }
}
