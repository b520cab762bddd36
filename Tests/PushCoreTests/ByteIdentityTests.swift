import XCTest

@testable import PushCore

/// Identities are compared by their UTF-8 bytes, never by Unicode canonical equivalence (SPEC §3; issue 10,
/// finding 1). Each pair below is canonically equivalent: Swift's `String ==` says they are equal.
final class ByteIdentityTests: XCTestCase {
    static let pairs: [(String, String, String)] = [
        ("KELVIN SIGN / K", "Kate", "\u{212A}ate"),
        ("precomposed / decomposed é", "caf\u{00E9}", "cafe\u{0301}"),
        ("ANGSTROM SIGN / Å", "\u{00C5}ngstr\u{00F6}m", "\u{212B}ngstr\u{00F6}m"),
        ("Å / A + ring", "\u{00C5}", "A\u{030A}"),
        ("OHM SIGN / Ω", "\u{03A9}", "\u{2126}"),
        ("Hangul syllable / jamo", "\u{AC00}", "\u{1100}\u{1161}"),
        ("combining marks in two orders", "s\u{0323}\u{0307}", "s\u{0307}\u{0323}"),
        ("ṩ / s + marks", "\u{1E69}", "s\u{0323}\u{0307}"),
    ]

    func testSwiftCallsEveryPairEqualButBytesDiffer() {
        for (name, a, b) in Self.pairs {
            XCTAssertEqual(a, b, "\(name): the hazard this test guards against")
            XCTAssertFalse(Array(a.utf8) == Array(b.utf8), name)
            XCTAssertFalse(a.bytesEqual(b), name)
            XCTAssertNotEqual(ExactString(a), ExactString(b), name)
            XCTAssertEqual(Set([ExactString(a), ExactString(b)]).count, 2, name)
            XCTAssertTrue(a.bytesEqual(String(decoding: Array(a.utf8), as: UTF8.self)), name)
        }
    }

    func testPathsTokensAndUIDsAreDistinctIdentities() throws {
        for (name, a, b) in Self.pairs {
            let pathA = try DataPath("/users/\(a)")
            let pathB = try DataPath("/users/\(b)")
            XCTAssertNotEqual(pathA, pathB, name)
            XCTAssertEqual(Set([pathA, pathB]).count, 2, name)
            XCTAssertFalse(pathA.isPrefix(of: try DataPath("/users/\(b)/x")), name)

            XCTAssertNotEqual(SubscriberKey(token: a), SubscriberKey(token: b), name)
            XCTAssertNotEqual(SubscriberKey(token: "t", uid: a), SubscriberKey(token: "t", uid: b), name)
            XCTAssertEqual(Set([SubscriberKey(token: "t", uid: a), SubscriberKey(token: "t", uid: b)]).count, 2, name)
            let retryA = RetryKey(app: a, path: pathA, subscriber: SubscriberKey(token: "t"))
            let retryB = RetryKey(app: b, path: pathA, subscriber: SubscriberKey(token: "t"))
            XCTAssertNotEqual(retryA, retryB, name)
        }
    }

    func testJSONMembersAndValuesAreComparedByBytes() throws {
        for (name, a, b) in Self.pairs {
            let text = "{\"\(a)\":1,\"\(b)\":2}"
            let parsed = try JSONParser.parse(text, rejectDuplicateKeys: true)
            XCTAssertEqual(parsed.objectValue?.count, 2, name)
            XCTAssertEqual(parsed[a], .number("1"), name)
            XCTAssertEqual(parsed[b], .number("2"), name)
            XCTAssertNotEqual(JSONValue.string(a), JSONValue.string(b), name)
            XCTAssertEqual(parsed.value(at: [ExactString(b)]), .number("2"), name)
        }
    }

    /// The reproduction of the review: a device subscribed at `/users/<KELVIN>ate` must never get Kate's data.
    func testSubscriptionAtAnEquivalentPathGetsNothingOfTheOther() throws {
        for (name, a, b) in Self.pairs {
            let index = AppIndex(app: "chat")
            let mine = SubscriberKey(token: "attacker")
            let hers = SubscriberKey(token: "victim")
            index.subscribe(path: try DataPath("/users/\(a)"), subscriber: hers, settings: .init(mode: .value, expiresAt: .max))
            index.subscribe(path: try DataPath("/users/\(b)"), subscriber: mine, settings: .init(mode: .value, expiresAt: .max))
            XCTAssertEqual(index.subscriptionCount, 2, name)

            // A write at her node reaches her only.
            let atHer = index.apply(
                ChangeEvent(app: "chat", path: try DataPath("/users/\(a)"), operation: .set, after: .string("secret")), now: 0)
            XCTAssertEqual(atHer.flatMap(\.recipients).map(\.subscriber), [hers], name)

            // A write above both: each gets the value at its own node, never the other's.
            let above = index.apply(
                ChangeEvent(
                    app: "chat", path: try DataPath("/users"), operation: .set,
                    after: .object([ExactString(a): .string("secret2")])),
                now: 0)
            for notification in above where notification.recipients.map(\.subscriber).contains(mine) {
                XCTAssertNotEqual(notification.content, .value(.string("secret2")), name)
                XCTAssertEqual(notification.path, try DataPath("/users/\(b)"), name)
            }
            XCTAssertNil(index.shadow(at: try DataPath("/users/\(b)")).flatMap { $0 == .string("secret2") ? $0 : nil }, name)
        }
    }

    func testPerUserIndexAndQuotaCountsAreByBytes() throws {
        for (name, a, b) in Self.pairs {
            let index = AppIndex(app: "chat")
            let path = try DataPath("/p")
            index.subscribe(path: path, subscriber: SubscriberKey(token: "t1", uid: a), settings: .init(mode: .noData, expiresAt: .max, authUID: a))
            XCTAssertEqual(index.subscriptions(ofUser: a).count, 1, name)
            XCTAssertEqual(index.subscriptions(ofUser: b).count, 0, name)
            XCTAssertEqual(index.subscriptionCount(owner: a), 1, name)
            XCTAssertEqual(index.subscriptionCount(owner: b), 0, name)
            XCTAssertNil(index.subscription(path: path, subscriber: SubscriberKey(token: "t1", uid: b)), name)
            index.subscribe(path: path, subscriber: SubscriberKey(token: a), settings: .init(mode: .noData, expiresAt: .max))
            XCTAssertEqual(index.subscriptionCount(device: DeviceKey(kind: .mobile, token: ExactString(a))), 1, name)
            XCTAssertEqual(index.subscriptionCount(device: DeviceKey(kind: .mobile, token: ExactString(b))), 0, name)
        }
    }

    func testStateRecordsKeepEquivalentIdentitiesApart() throws {
        for (name, a, b) in Self.pairs {
            let settings = SubscriptionSettings(mode: .noData, expiresAt: 10)
            let recordA = SubscriptionRecord(
                app: "chat", subscription: Subscription(path: try DataPath("/u/\(a)"), subscriber: SubscriberKey(token: "t", uid: a), settings: settings))
            let recordB = SubscriptionRecord(
                app: "chat", subscription: Subscription(path: try DataPath("/u/\(b)"), subscriber: SubscriberKey(token: "t", uid: b), settings: settings))
            XCTAssertNotEqual(recordA.key, recordB.key, name)
            let index = AppIndex(app: "chat")
            for record in [recordA, recordB] {
                try StateRecord.decode(key: record.key, value: record.value).apply(to: index)
            }
            XCTAssertEqual(index.subscriptionCount, 2, name)
            try StateRecord.decode(key: recordB.key, value: nil).apply(to: index)
            XCTAssertEqual(index.allSubscriptions().map(\.subscriber.uid), [a], name)
        }
    }

    /// Keys are split on the byte `/`: a key that starts with a combining mark is not glued onto the `/`
    /// before it (found by FuzzStateRecord: such a subscription changed identity after a restart).
    func testPathKeysAreSplitOnTheSlashByte() throws {
        XCTAssertEqual(try DataPath("\u{301}x").segments, ["\u{301}x"])
        XCTAssertEqual(try DataPath("/\u{301}x").segments, ["\u{301}x"])
        XCTAssertEqual(try DataPath("a/\u{301}b").segments, ["a", "\u{301}b"])
        XCTAssertEqual(try DataPath("a/\u{301}b/").segments, ["a", "\u{301}b"])
        XCTAssertEqual(try DataPath("a/\u{301}/b").segments, ["a", "\u{301}", "b"])
        for text in ["\u{301}x", "a/\u{301}b", "\u{301}/\u{302}"] {
            let path = try DataPath(text)
            XCTAssertEqual(try DataPath(path.description), path, text)
            let record = SubscriptionRecord(
                app: "toto", subscription: Subscription(path: path, subscriber: SubscriberKey(token: "t"), settings: .init(mode: .value, expiresAt: 1)))
            guard case .subscription(let decoded) = try StateRecord.decode(key: record.key, value: record.value) else {
                return XCTFail("not a subscription")
            }
            XCTAssertEqual(decoded.subscription.path, path, text)
        }
    }
}
