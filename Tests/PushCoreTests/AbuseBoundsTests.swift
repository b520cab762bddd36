import XCTest

@testable import PushCore

/// Bounds against abuse (issue 10): quota counters, the anonymous-write bucket, the expiry scan, hostile
/// state records, shadows too deep to read back.
final class AbuseBoundsTests: XCTestCase {
    func testQuotaCountersFollowSubscribeRefreshAndUnsubscribe() throws {
        let index = AppIndex(app: "a")
        let device = SubscriberKey(token: "d1")
        for key in 0..<5 {
            index.subscribe(path: try DataPath("/n/\(key)"), subscriber: device, settings: .init(mode: .noData, expiresAt: .max, authUID: "alice"))
        }
        // A refresh does not count twice; a refresh by another owner moves the count.
        index.subscribe(path: try DataPath("/n/0"), subscriber: device, settings: .init(mode: .value, expiresAt: .max, authUID: "alice"))
        index.subscribe(path: try DataPath("/n/1"), subscriber: device, settings: .init(mode: .value, expiresAt: .max, authUID: "bob"))
        XCTAssertEqual(index.subscriptionCount, 5)
        XCTAssertEqual(index.subscriptionCount(device: device.device), 5)
        XCTAssertEqual(index.subscriptionCount(owner: "alice"), 4)
        XCTAssertEqual(index.subscriptionCount(owner: "bob"), 1)
        index.unsubscribe(path: try DataPath("/n/1"), subscriber: device)
        index.unsubscribe(path: try DataPath("/n/2"), subscriber: device)
        XCTAssertEqual(index.subscriptionCount(device: device.device), 3)
        XCTAssertEqual(index.subscriptionCount(owner: "alice"), 3)
        XCTAssertEqual(index.subscriptionCount(owner: "bob"), 0)
        _ = index.removeAll()
        XCTAssertEqual(index.subscriptionCount(device: device.device), 0)
        XCTAssertEqual(index.subscriptionCount(owner: "alice"), 0)
    }

    /// One token under several kinds (the same bytes registered with two providers) is several devices: each
    /// counted exactly (``DeviceCounts`` keeps the first under its token, the others under their full key),
    /// whichever kind comes and goes first; the estimate comes back when they are gone.
    func testOneTokenUnderSeveralKindsIsCountedPerKind() throws {
        let index = AppIndex(app: "a")
        let token = "shared-token-longer-than-15-bytes"
        let kinds: [SubscriberKind] = [.mobile, .huawei, .webhook]
        func device(_ kind: SubscriberKind) -> DeviceKey { DeviceKey(kind: kind, token: ExactString(token)) }
        func subscribe(_ kind: SubscriberKind, _ path: String) throws {
            index.subscribe(path: try DataPath(path), subscriber: SubscriberKey(kind: kind, token: token), settings: .init(mode: .noData, expiresAt: .max))
        }
        func unsubscribe(_ kind: SubscriberKind, _ path: String) throws {
            XCTAssertNotNil(index.unsubscribe(path: try DataPath(path), subscriber: SubscriberKey(kind: kind, token: token)))
        }
        // Once before: the tables keep the capacity they grow to (counted by byteCount).
        for kind in kinds { try subscribe(kind, "/w") }
        for kind in kinds { try unsubscribe(kind, "/w") }
        let empty = index.byteCount
        try subscribe(.mobile, "/1")
        try subscribe(.huawei, "/1")
        try subscribe(.huawei, "/2")
        try subscribe(.webhook, "/3")
        XCTAssertEqual(kinds.map { index.subscriptionCount(device: device($0)) }, [1, 2, 1])
        // The first kind goes; the others keep their counts, and it comes back counted apart from them.
        try unsubscribe(.mobile, "/1")
        XCTAssertEqual(kinds.map { index.subscriptionCount(device: device($0)) }, [0, 2, 1])
        try subscribe(.mobile, "/4")
        try subscribe(.mobile, "/5")
        try subscribe(.huawei, "/6")
        XCTAssertEqual(kinds.map { index.subscriptionCount(device: device($0)) }, [2, 3, 1])
        XCTAssertEqual(index.subscriptionCount(device: DeviceKey(kind: .mobile, token: "other")), 0)
        for path in ["/1", "/2", "/6"] { try unsubscribe(.huawei, path) }
        XCTAssertEqual(kinds.map { index.subscriptionCount(device: device($0)) }, [2, 0, 1])
        for path in ["/4", "/5"] { try unsubscribe(.mobile, path) }
        try unsubscribe(.webhook, "/3")
        XCTAssertEqual(kinds.map { index.subscriptionCount(device: device($0)) }, [0, 0, 0])
        XCTAssertEqual(index.byteCount, empty)
    }

    /// ``DeviceCounts`` against a dictionary of ``DeviceKey``s, random steps from fixed seeds over a few tokens
    /// under every kind.
    func testDeviceCountsAgreeWithADictionary() {
        for seed: UInt64 in [1, 7, 19, 2026] {
            var random = RetryTestRandom(seed: seed)
            var counts = DeviceCounts()
            var model: [DeviceKey: Int32] = [:]
            let devices = ["t0", "t1", "t2"].flatMap { token in
                SubscriberKind.allCases.map { DeviceKey(kind: $0, token: ExactString(token)) }
            }
            for step in 0..<2000 {
                let device = devices[Int(random.next() % UInt64(devices.count))]
                if random.next() % 2 == 0 {
                    let found = counts.find(device)
                    XCTAssertEqual(found == nil, model[device] == nil, "seed \(seed) step \(step)")
                    if let found { XCTAssertEqual(counts.storedToken(at: found), device.packedToken) }
                    XCTAssertEqual(counts.increment(device, at: found), model[device] == nil, "seed \(seed) step \(step)")
                    model[device, default: 0] += 1
                } else {
                    let removed = counts.decrement(device)
                    XCTAssertEqual(removed != nil, model[device] == 1, "seed \(seed) step \(step)")
                    if let removed { XCTAssertEqual(removed, device.packedToken) }
                    if let held = model[device] { model[device] = held > 1 ? held - 1 : nil }
                }
                for each in devices {
                    XCTAssertEqual(counts.count(of: each), model[each] ?? 0, "seed \(seed) step \(step) \(each)")
                    XCTAssertEqual(counts.find(each) != nil, model[each] != nil)
                }
            }
        }
    }

    /// ``DeviceCounts`` against a dictionary through counts above 255 (where a device's byte spills into the exact
    /// table) and back down: mostly increments, then mostly decrements, over two devices.
    func testDeviceCountsAgreeWithADictionaryAboveAByte() {
        var random = RetryTestRandom(seed: 255)
        var counts = DeviceCounts()
        var model: [DeviceKey: Int32] = [:]
        let devices = [DeviceKey(kind: .mobile, token: "t0"), DeviceKey(kind: .huawei, token: "t0")]
        for step in 0..<3000 {
            let device = devices[Int(random.next() % 2)]
            let up = random.next() % 10 < (step < 1500 ? 8 : 2)
            if up {
                XCTAssertEqual(counts.increment(device, at: counts.find(device)), model[device] == nil)
                model[device, default: 0] += 1
            } else {
                let removed = counts.decrement(device)
                XCTAssertEqual(removed != nil, model[device] == 1, "step \(step)")
                if let held = model[device] { model[device] = held > 1 ? held - 1 : nil }
            }
            for each in devices { XCTAssertEqual(counts.count(of: each), model[each] ?? 0, "step \(step) \(each)") }
        }
        XCTAssertGreaterThan(model.values.max() ?? 0, 0)
    }

    func testPerUserListIsKeptInOrder() throws {
        let index = AppIndex(app: "a")
        for (path, token) in [("/b", "2"), ("/a", "9"), ("/b", "1"), ("/a/c", "0")] {
            index.subscribe(path: try DataPath(path), subscriber: SubscriberKey(token: token, uid: "u"), settings: .init(mode: .noData, expiresAt: .max))
        }
        XCTAssertEqual(index.subscriptions(ofUser: "u").map { "\($0.path)#\($0.subscriber.token)" }, ["/a#9", "/a/c#0", "/b#1", "/b#2"])
        index.unsubscribe(path: try DataPath("/b"), subscriber: SubscriberKey(token: "1", uid: "u"))
        XCTAssertEqual(index.subscriptions(ofUser: "u").map { "\($0.path)#\($0.subscriber.token)" }, ["/a#9", "/a/c#0", "/b#2"])
    }

    func testExpiryScanFindsDueSubscriptionsAndTightensItsBounds() throws {
        let index = AppIndex(app: "a")
        index.subscribe(path: try DataPath("/x/y"), subscriber: SubscriberKey(token: "old"), settings: .init(mode: .noData, expiresAt: 100))
        index.subscribe(path: try DataPath("/x/z"), subscriber: SubscriberKey(token: "new"), settings: .init(mode: .noData, expiresAt: 500))
        index.subscribe(path: try DataPath("/w"), subscriber: SubscriberKey(token: "later"), settings: .init(mode: .noData, expiresAt: 900))
        XCTAssertEqual(index.expiredSubscriptions(now: 50), [])
        XCTAssertEqual(index.expiredSubscriptions(now: 100).map(\.subscriber.token), ["old"])
        // Refreshed to a later expiry: the stale bound makes the next scan look, finds nothing, tightens.
        index.subscribe(path: try DataPath("/x/y"), subscriber: SubscriberKey(token: "old"), settings: .init(mode: .noData, expiresAt: 1000))
        XCTAssertEqual(index.expiredSubscriptions(now: 200), [])
        XCTAssertEqual(index.root.earliestExpiry, 500)
        XCTAssertEqual(Set(index.expiredSubscriptions(now: 950).map(\.subscriber.token)), ["new", "later"])
    }

    /// The bounds are kept in 32 bits (seconds from the epoch to 2106): expiries outside that range are still found.
    func testExpiryScanFindsExpiriesBeforeTheEpochAndAfter2106() throws {
        let index = AppIndex(app: "a")
        let far: Int64 = 5_000_000_000
        index.subscribe(path: try DataPath("/p/past"), subscriber: SubscriberKey(token: "past"), settings: .init(mode: .noData, expiresAt: -5))
        index.subscribe(path: try DataPath("/f/far"), subscriber: SubscriberKey(token: "far"), settings: .init(mode: .noData, expiresAt: far))
        XCTAssertEqual(index.expiredSubscriptions(now: -6), [])
        XCTAssertEqual(index.expiredSubscriptions(now: -5).map(\.subscriber.token), ["past"])
        index.unsubscribe(path: try DataPath("/p/past"), subscriber: SubscriberKey(token: "past"))
        XCTAssertEqual(index.expiredSubscriptions(now: far - 1), [])
        XCTAssertLessThanOrEqual(index.root.earliestExpiry, far, "a lower bound")
        XCTAssertEqual(index.expiredSubscriptions(now: far).map(\.subscriber.token), ["far"])
        index.unsubscribe(path: try DataPath("/f/far"), subscriber: SubscriberKey(token: "far"))
        XCTAssertTrue(index.root.children.isEmpty, "emptied nodes are removed up to the root")
        XCTAssertEqual(index.expiredSubscriptions(now: .max), [])
        XCTAssertEqual(index.root.earliestExpiry, .max)
    }

    /// 400 keys deep, as in the review: the scans walk it once, with one path stack (no quadratic copies).
    func testDeepPathsAreScannedLinearly() throws {
        let index = AppIndex(app: "a")
        let keys = Array(repeating: "k", count: 1000)
        let path = try DataPath("/" + keys.joined(separator: "/"))
        index.subscribe(path: path, subscriber: SubscriberKey(token: "d"), settings: .init(mode: .noData, expiresAt: 1))
        XCTAssertEqual(index.expiredSubscriptions(now: 2).first?.path, path)
        XCTAssertEqual(index.allSubscriptions().first?.path, path)
    }

    func testTokenBucket() {
        var bucket = TokenBucket(rate: 2, burst: 3)
        XCTAssertEqual(bucket.take(now: 0), .admitted)
        XCTAssertEqual(bucket.take(now: 0), .admitted)
        XCTAssertEqual(bucket.take(now: 0), .admitted)
        XCTAssertEqual(bucket.take(now: 0), .refused(retryAfter: 0.5))
        XCTAssertEqual(bucket.take(now: 0.5), .admitted)
        XCTAssertEqual(bucket.take(now: 0.4), .refused(retryAfter: 0.5))  // time going back changes nothing
        XCTAssertEqual(bucket.take(now: 100), .admitted)  // refilled to the burst, not beyond
        var closed = TokenBucket(rate: 0, burst: 1)
        XCTAssertEqual(closed.take(now: 0), .admitted)
        XCTAssertEqual(closed.take(now: 1000), .refused(retryAfter: .infinity))
    }

    /// A hostile retry record (any number where an attempt count belongs) is refused, never a trap (issue 10,
    /// finding 7: `Int(attempt)` crashed every replica at every start).
    func testRetryRecordWithOutOfRangeNumbersIsRefused() throws {
        let key = Array(#"["retry","a","/p","mobile","tok",""]"#.utf8)
        for attempt in ["1e300", "-1", "1.5", "9223372036854775808", "1e7"] {
            let value = Array(
                #"[{"content":{"t":"noData"},"format":"v1","first":1,"notBefore":2,"attempt":\#(attempt)}]"#.utf8)
            XCTAssertThrowsError(try RetryRecord.decode(key: key, value: value), attempt)
            XCTAssertThrowsError(try StateRecord.decode(key: key, value: value), attempt)
        }
        for field in [#""first":1e400"#, #""notBefore":-1e999"#] {
            let value = Array(
                #"[{"content":{"t":"noData"},"format":"v1","first":1,"notBefore":2,"attempt":1,\#(field)}]"#.utf8)
            _ = try? RetryRecord.decode(key: key, value: value)  // must not trap
        }
        let good = Array(#"[{"content":{"t":"noData"},"format":"v1","first":1,"notBefore":2,"attempt":3}]"#.utf8)
        XCTAssertEqual(try RetryRecord.decode(key: key, value: good)?.entries.first?.attempt, 3)
    }

    /// A shadow nested deeper than the parser reads back is `too_big` before it is stored.
    func testShadowTooDeepToReadBackExceedsAnyLimit() throws {
        func nested(_ levels: Int) -> JSONValue {
            var value = JSONValue.number("1")
            for _ in 1..<levels { value = .array([value]) }
            return value
        }
        let readable = nested(JSONParser.maximumDepth)
        XCTAssertEqual(readable.nestingLevels, JSONParser.maximumDepth)
        XCTAssertNoThrow(try JSONParser.parse(JSONWriter.bytes(readable)))
        XCTAssertFalse(ShadowRecord(app: "a", path: .root, value: readable).exceeds(limit: .max))
        let tooDeep = nested(JSONParser.maximumDepth + 1)
        XCTAssertThrowsError(try JSONParser.parse(JSONWriter.bytes(tooDeep)))
        XCTAssertTrue(ShadowRecord(app: "a", path: .root, value: tooDeep).exceeds(limit: .max))
    }
}
