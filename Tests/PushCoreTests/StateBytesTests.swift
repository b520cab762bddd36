import Dispatch
import Synchronization
import XCTest

@testable import PushCore

/// The byte estimate of an app's index (issue 17, finding 4) and the per-key rate tables (finding 6).
final class StateBytesTests: XCTestCase {
    private func settings(_ mode: SubscriptionMode = .noData, uid: String? = nil) -> SubscriptionSettings {
        SubscriptionSettings(mode: mode, expiresAt: .max, authUID: uid)
    }

    /// Every create adds what `bytesToSubscribe` predicted; removing everything gives every byte back, to the
    /// meter chain too.
    func testEstimateIsPredictedAddedAndGivenBack() throws {
        let replica = ByteMeter()
        let partition = ByteMeter(parent: replica)
        let index = AppIndex(app: "a", meter: ByteMeter(parent: partition))
        let empty = index.byteCount
        XCTAssertEqual(replica.bytes, empty)
        let long = String(repeating: "k", count: 2000)
        let shapes: [(String, SubscriberKey, SubscriptionSettings)] = [
            ("/users/alice", SubscriberKey(token: "short"), settings()),
            ("/users/alice", SubscriberKey(token: "fcm-token-of-more-than-fifteen-bytes"), settings(.value)),
            ("/users/bob/inbox", SubscriberKey(token: "fcm-token-of-more-than-fifteen-bytes"), settings(uid: "bob-the-user-uid-123")),
            ("/\(long)", SubscriberKey(token: String(repeating: "d", count: 1000)), settings()),
            ("/v2/\(long)", SubscriberKey(token: String(repeating: "e", count: 1000), uid: "carol-with-a-long-uid"),
             settings(uid: "carol-with-a-long-uid")),
            ("/v2/\(long)", SubscriberKey(token: "other-device-token-0001", uid: "carol-with-a-long-uid"),
             settings(uid: "carol-with-a-long-uid")),
        ] + (0..<40).map { ("/many/child\($0)", SubscriberKey(token: "device-number-\($0)-long-enough"), settings()) }
        var added: [(DataPath, SubscriberKey)] = []
        for (text, subscriber, settings) in shapes {
            let path = try DataPath(text)
            let predicted = index.bytesToSubscribe(path: path, subscriber: subscriber, settings: settings)
            let before = index.byteCount
            XCTAssertEqual(index.subscribe(path: path, subscriber: subscriber, settings: settings), .created)
            XCTAssertEqual(index.byteCount - before, predicted, text.prefix(40).description)
            XCTAssertEqual(index.bytesToSubscribe(path: path, subscriber: subscriber, settings: settings), 0, "a refresh adds nothing")
            added.append((path, subscriber))
        }
        XCTAssertGreaterThan(index.byteCount - empty, 2 * 2000 + 2 * 1000)
        XCTAssertEqual(partition.bytes, index.byteCount)
        XCTAssertEqual(replica.bytes, index.byteCount)
        for (path, subscriber) in added.reversed() { index.unsubscribe(path: path, subscriber: subscriber) }
        // Dictionaries keep their capacity after removals (as Swift's do); strings, nodes and payloads are gone.
        let left = index.byteCount - empty
        XCTAssertLessThan(left, 4096)
        XCTAssertEqual(replica.bytes, index.byteCount)
        _ = index.removeAll()
        XCTAssertEqual(replica.bytes, index.byteCount)
    }

    /// A device's count is a byte until it reaches 255 subscriptions, then exact in a second table: every create on
    /// the way up adds what was predicted (the second table's bucket included), the count stays exact both ways,
    /// and removing them all gives back what the way up added (to the tables' kept capacity).
    func testADeviceWithHundredsOfSubscriptionsIsCountedExactly() throws {
        let index = AppIndex(app: "a")
        let device = SubscriberKey(token: "one-device-with-many-subscriptions")
        let empty = index.byteCount
        for round in 0..<2 {
            for number in 0..<300 {
                let path = try DataPath("/p\(number)")
                let predicted = index.bytesToSubscribe(path: path, subscriber: device, settings: settings())
                let before = index.byteCount
                XCTAssertEqual(index.subscribe(path: path, subscriber: device, settings: settings()), .created)
                XCTAssertEqual(index.byteCount - before, predicted, "round \(round), subscription \(number + 1)")
                XCTAssertEqual(index.subscriptionCount(device: device.device), number + 1)
            }
            for number in (0..<300).reversed() {
                index.unsubscribe(path: try DataPath("/p\(number)"), subscriber: device)
                XCTAssertEqual(index.subscriptionCount(device: device.device), number)
            }
            XCTAssertLessThan(index.byteCount - empty, 4096, "round \(round): only the tables' capacity is left")
        }
    }

    /// A uid that is both a v1 owner and a v2 user is one stored object, counted once: whatever the order the two
    /// come and go in, each create adds what was predicted, and a second round of both ends at the same figure as the
    /// first (a removal that gave back less, or more, than was added would move it).
    func testAUIDThatOwnsAndSubscribesIsCountedOnce() throws {
        let uid = "a-uid-of-more-than-fifteen-bytes"
        let v1 = (try DataPath("/v1"), SubscriberKey(token: "v1-device-token-long"), settings(uid: uid))
        let v2 = (try DataPath("/v2"), SubscriberKey(token: "v2-device-token-long", uid: uid), SubscriptionSettings(
            mode: .value, format: .v2, expiresAt: .max, authUID: uid))
        for (first, second) in [(v1, v2), (v2, v1)] {
            for (gone, last) in [(first, second), (second, first)] {
                let index = AppIndex(app: "a")
                var figures: [Int] = []
                for _ in 0..<2 {
                    for (path, subscriber, settings) in [first, second] {
                        let predicted = index.bytesToSubscribe(path: path, subscriber: subscriber, settings: settings)
                        let before = index.byteCount
                        index.subscribe(path: path, subscriber: subscriber, settings: settings)
                        XCTAssertEqual(index.byteCount - before, predicted)
                    }
                    figures.append(index.byteCount)
                    index.unsubscribe(path: gone.0, subscriber: gone.1)
                    index.unsubscribe(path: last.0, subscriber: last.1)
                }
                XCTAssertEqual(figures[0], figures[1], "the same bytes after a round of both")
            }
        }
    }

    /// A device's token and a user's uid are stored once, whatever the number of their subscriptions.
    func testTokensAndUIDsAreStoredOnce() throws {
        let index = AppIndex(app: "a")
        let token = String(repeating: "t", count: 1000)
        try index.subscribe(path: DataPath("/x/0"), subscriber: SubscriberKey(token: token), settings: settings())
        let one = index.byteCount
        try index.subscribe(path: DataPath("/x/1"), subscriber: SubscriberKey(token: String(repeating: "t", count: 1000)), settings: settings())
        XCTAssertLessThan(index.byteCount - one, 1000, "the second subscription shares the device's token")
        let stored = index.allSubscriptions().map(\.subscriber.packedToken)
        XCTAssertTrue(stored[0].isSame(as: stored[1]), "one token object for both")
    }

    /// Shadows are counted when seeded, replaced and dropped.
    func testShadowsAreCounted() throws {
        let meter = ByteMeter()
        let index = AppIndex(app: "a", meter: meter)
        let path = try DataPath("/news")
        index.subscribe(path: path, subscriber: SubscriberKey(token: "device-token-long-enough"), settings: settings(.value))
        let before = index.byteCount
        let big = JSONValue.object(["text": .string(String(repeating: "x", count: 5000)), "n": .number("1")])
        index.restoreShadow(at: path, value: big)
        XCTAssertGreaterThan(index.byteCount - before, 5000)
        XCTAssertEqual(meter.bytes, index.byteCount)
        _ = index.apply(ChangeEvent(app: "a", path: path, operation: .set, after: .string("small")), now: 0)
        XCTAssertEqual(index.byteCount, before + AppIndex.seededBytes, "a seeded node is larger; a small string is inline")
        XCTAssertEqual(meter.bytes, index.byteCount)
        index.restoreShadow(at: path, value: big)
        index.unsubscribe(path: path, subscriber: SubscriberKey(token: "device-token-long-enough"))
        XCTAssertEqual(meter.bytes, index.byteCount)
        XCTAssertLessThan(index.byteCount, before)
    }

    /// An index that is freed gives its bytes back to the meters it added into.
    func testFreedIndexGivesItsBytesBack() throws {
        let replica = ByteMeter()
        do {
            let index = AppIndex(app: "a", meter: ByteMeter(parent: replica))
            try index.subscribe(path: DataPath("/a/b"), subscriber: SubscriberKey(token: String(repeating: "z", count: 500)), settings: settings())
            XCTAssertGreaterThan(replica.bytes, 500)
        }
        XCTAssertEqual(replica.bytes, 0)
    }

    /// Two reservations cannot both pass the last bytes of a limit; released bytes are available again.
    func testReservationsAreAtomicAgainstTheLimit() {
        let meter = ByteMeter()
        meter.add(900)
        XCTAssertTrue(meter.reserve(60, limit: 1000))
        XCTAssertFalse(meter.reserve(60, limit: 1000))
        XCTAssertTrue(meter.reserve(40, limit: 1000))
        meter.release(60)
        XCTAssertTrue(meter.reserve(60, limit: 1000))
        XCTAssertTrue(meter.reserve(1 << 40, limit: 0), "0: no limit")
        let shared = ByteMeter()
        let admitted = Counter()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<1000 where shared.reserve(1, limit: 1000) { admitted.value.add(1, ordering: .relaxed) }
        }
        XCTAssertEqual(admitted.value.load(ordering: .relaxed), 1000)
    }

    func testRateTablePerKey() {
        var table = RateTable(rate: 1, burst: 2, capacity: 100)
        for _ in 0..<2 {
            XCTAssertEqual(table.wait("a", now: 0), 0)
            table.take("a", now: 0)
        }
        XCTAssertEqual(table.wait("a", now: 0), 1, accuracy: 1e-9)
        XCTAssertEqual(table.wait("b", now: 0), 0, "another key has its own bucket")
        XCTAssertEqual(table.wait("a", now: 0.5), 0.5, accuracy: 1e-9)
        XCTAssertEqual(table.wait("a", now: 1), 0)
        XCTAssertEqual(table.count, 1, "a key that only looked is not stored")
        var closed = RateTable(rate: 0, burst: 1)
        closed.take("x", now: 0)
        XCTAssertEqual(closed.wait("x", now: 1e9), .infinity)
    }

    /// An attacker inventing keys never grows the table past its capacity; a key spending tokens within a
    /// generation keeps its level.
    func testRateTableIsBounded() {
        var table = RateTable(rate: 0.001, burst: 1, capacity: 1000)
        for key in 0..<100_000 {
            table.take("invented-\(key)", now: Double(key) / 1000)
            XCTAssertLessThanOrEqual(table.count, 1000)
            if key % 300 == 0 { table.take("victim", now: Double(key) / 1000) }
            XCTAssertGreaterThan(table.wait("victim", now: Double(key) / 1000), 0, "\(key)")
        }
    }
}

private final class Counter: Sendable {
    let value = Atomic<Int>(0)
}
