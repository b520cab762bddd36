import CompactJSON
import XCTest

@testable import PushCore

/// AppIndex's removal path (issue 19, `mem`: an emptied node is removed at once, from the bottom up to the root,
/// and no subtree count is kept): removal sequences checked against a dictionary, as a load applies them
/// (create, tombstone, create again) and at random from fixed seeds.
final class AppIndexRemovalTests: XCTestCase {
    func testRemovingTheOnlyLeafEmptiesTheTrie() throws {
        let index = AppIndex(app: "a")
        let path = try DataPath("/a/b/c")
        // Once before: the per-device and per-user maps keep their capacity (counted by byteCount) after a removal.
        index.subscribe(path: try DataPath("/w"), subscriber: SubscriberKey(token: "t", uid: "u"), settings: .init(mode: .noData, expiresAt: 50))
        index.unsubscribe(path: try DataPath("/w"), subscriber: SubscriberKey(token: "t", uid: "u"))
        let empty = index.byteCount
        index.subscribe(path: path, subscriber: SubscriberKey(token: "t", uid: "u"), settings: .init(mode: .value, expiresAt: 50))
        XCTAssertNotNil(index.unsubscribe(path: path, subscriber: SubscriberKey(token: "t", uid: "u")))
        XCTAssertNil(index.subscription(path: path, subscriber: SubscriberKey(token: "t", uid: "u")))
        XCTAssertNil(index.unsubscribe(path: path, subscriber: SubscriberKey(token: "t", uid: "u")), "a second tombstone finds nothing")
        XCTAssertTrue(index.root.children.isEmpty)
        XCTAssertEqual(index.subscriptionCount, 0)
        XCTAssertEqual(index.subscriptions(ofUser: "u"), [])
        XCTAssertEqual(index.allSubscriptions(), [])
        XCTAssertEqual(index.byteCount, empty)
    }

    /// The order a load reads one key's records in: create, delete (tombstone), create, delete.
    func testCreateDeleteCreateDeleteOfOneKey() throws {
        let index = AppIndex(app: "a")
        let path = try DataPath("/z/v2")
        let key = SubscriberKey(token: "tok", uid: "user1")
        for round in 0..<3 {
            index.subscribe(path: path, subscriber: key, settings: .init(mode: .noData, expiresAt: 100 + Int64(round)))
            XCTAssertEqual(index.subscription(path: path, subscriber: key)?.expiresAt, 100 + Int64(round))
            XCTAssertEqual(index.subscriptions(ofUser: "user1").count, 1)
            XCTAssertNotNil(index.unsubscribe(path: path, subscriber: key))
            XCTAssertNil(index.subscription(path: path, subscriber: key), "round \(round)")
            XCTAssertEqual(index.subscriptions(ofUser: "user1"), [], "round \(round)")
            XCTAssertEqual(index.apply(ChangeEvent(app: "a", path: path, operation: .set, after: .string("x")), now: 0), [],
                           "a deleted subscription is not notified (round \(round))")
        }
        XCTAssertTrue(index.root.children.isEmpty)
    }

    /// Removing the last subscriber of a chain removes the chain's nodes up to the first one still needed: a node
    /// with a subscriber of its own, or with another child.
    func testRemovalEmptiesAChainUpToTheFirstNodeStillNeeded() throws {
        let index = AppIndex(app: "a")
        let key = SubscriberKey(token: "t")
        for path in ["/a/b/c/d", "/a/x", "/a/b/y/z"] {
            index.subscribe(path: try DataPath(path), subscriber: key, settings: .init(mode: .noData, expiresAt: 10))
        }
        index.subscribe(path: try DataPath("/a/b"), subscriber: SubscriberKey(token: "s"), settings: .init(mode: .noData, expiresAt: 10))
        index.unsubscribe(path: try DataPath("/a/b/c/d"), subscriber: key)
        XCTAssertNil(index.node(at: try DataPath("/a/b/c")), "the emptied chain is gone")
        XCTAssertNotNil(index.node(at: try DataPath("/a/b/y/z")), "its sibling stays")
        index.unsubscribe(path: try DataPath("/a/b/y/z"), subscriber: key)
        XCTAssertNotNil(index.node(at: try DataPath("/a/b")), "a node with a subscriber of its own stays")
        XCTAssertTrue(try XCTUnwrap(index.node(at: try DataPath("/a/b"))).children.isEmpty)
        index.unsubscribe(path: try DataPath("/a/b"), subscriber: SubscriberKey(token: "s"))
        XCTAssertNil(index.node(at: try DataPath("/a/b")))
        XCTAssertEqual(index.allSubscriptions().map(\.path.description), ["/a/x"])
        // Re-adding below a removed chain builds it again.
        index.subscribe(path: try DataPath("/a/b/c/d"), subscriber: key, settings: .init(mode: .value, expiresAt: 20))
        XCTAssertEqual(index.subscription(path: try DataPath("/a/b/c/d"), subscriber: key)?.mode, .value)
        XCTAssertEqual(index.apply(ChangeEvent(app: "a", path: try DataPath("/a/b/c/d"), operation: .set, after: .string("v")), now: 0).count, 1)
        index.unsubscribe(path: try DataPath("/a/x"), subscriber: key)
        index.unsubscribe(path: try DataPath("/a/b/c/d"), subscriber: key)
        XCTAssertTrue(index.root.children.isEmpty)
    }

    /// A node that gains subscribers of its own becomes a payload node in its place (one object), and turns back
    /// into a plain node when its last one goes while it has children (issue 19, `mem3`): the children, the
    /// expiry bound and the bytes follow, at the root as below it.
    func testANodeGainsAndLosesSubscribersOfItsOwnKeepingItsChildren() throws {
        for (at, below) in [("/a", "/a/b"), ("/", "/b")] {
            let index = AppIndex(app: "a")
            let child = SubscriberKey(token: "child-token-longer-than-15", uid: "user-longer-than-15")
            index.subscribe(path: try DataPath(below), subscriber: child, settings: .init(mode: .value, expiresAt: 300, authUID: "user-longer-than-15"))
            let own = SubscriberKey(token: "own-token-longer-than-15")
            // Once elsewhere first: the per-device map keeps the capacity it grows to (counted by byteCount).
            index.subscribe(path: try DataPath("/elsewhere"), subscriber: own, settings: .init(mode: .noData, expiresAt: .max))
            index.unsubscribe(path: try DataPath("/elsewhere"), subscriber: own)
            // The child's shadow seeded first: it stays seeded (a larger node) through what follows.
            _ = index.apply(ChangeEvent(app: "a", path: try DataPath(below), operation: .set, after: .string("u")), now: 0)
            let plain = index.byteCount
            let childNode = try XCTUnwrap(index.node(at: try DataPath(below)))
            let settings = SubscriptionSettings(mode: .value, expiresAt: 100)
            let predicted = index.bytesToSubscribe(path: try DataPath(at), subscriber: own, settings: settings)
            index.subscribe(path: try DataPath(at), subscriber: own, settings: settings)
            XCTAssertEqual(index.byteCount, plain + predicted, at)
            XCTAssertNotNil(index.node(at: try DataPath(at))?.payload, at)
            XCTAssertTrue(index.node(at: try DataPath(below)) === childNode, "the child moved along (\(at))")
            XCTAssertEqual(index.node(at: try DataPath(at))?.earliestExpiry, 100, at)
            XCTAssertEqual(index.expiredSubscriptions(now: 100).map(\.subscriber.token), [own.token], at)
            index.subscribe(path: try DataPath(at), subscriber: own, settings: .init(mode: .value, expiresAt: 200))
            XCTAssertEqual(index.apply(ChangeEvent(app: "a", path: try DataPath(below), operation: .set, after: .string("v")), now: 0).count, 2, at)
            XCTAssertNotNil(index.unsubscribe(path: try DataPath(at), subscriber: own))
            XCTAssertNil(index.node(at: try DataPath(at))?.payload, at)
            XCTAssertTrue(index.node(at: try DataPath(below)) === childNode, "the child stayed (\(at))")
            XCTAssertEqual(index.byteCount, plain, at)
            XCTAssertEqual(index.expiredSubscriptions(now: 300).map(\.subscriber.token), [child.token], at)
            XCTAssertEqual(index.subscriptions(ofUser: "user-longer-than-15").map(\.path.description), [below], at)
            XCTAssertEqual(index.apply(ChangeEvent(app: "a", path: try DataPath(below), operation: .set, after: .string("w")), now: 0).count, 1, at)
        }
    }

    /// After a removal the bounds may be stale (too early), never too late: the scan still finds what is due.
    func testExpiryBoundsAfterRemoval() throws {
        let index = AppIndex(app: "a")
        index.subscribe(path: try DataPath("/e/early"), subscriber: SubscriberKey(token: "early"), settings: .init(mode: .noData, expiresAt: 100))
        index.subscribe(path: try DataPath("/e/late"), subscriber: SubscriberKey(token: "late"), settings: .init(mode: .noData, expiresAt: 300))
        index.unsubscribe(path: try DataPath("/e/early"), subscriber: SubscriberKey(token: "early"))
        XCTAssertLessThanOrEqual(index.root.earliestExpiry, 300)
        XCTAssertEqual(index.expiredSubscriptions(now: 200), [], "the removed subscription is not found")
        XCTAssertEqual(index.root.earliestExpiry, 300, "the scan tightened the bound")
        // Re-added with a later expiry where a removed one was.
        index.subscribe(path: try DataPath("/e/early"), subscriber: SubscriberKey(token: "early"), settings: .init(mode: .noData, expiresAt: 400))
        XCTAssertEqual(index.expiredSubscriptions(now: 300).map(\.subscriber.token), ["late"])
        XCTAssertEqual(index.expiredSubscriptions(now: 400).map(\.subscriber.token).sorted(), ["early", "late"])
    }

    // MARK: Random sequences against a model

    func testRandomSequencesAgreeWithADictionary() throws {
        continueAfterFailure = false  // the first step that disagrees (with its seed) is the one to read
        for seed: UInt64 in [1, 2, 3, 19, 4242, 0xDEAD_BEEF] {
            try runRandomSequence(seed: seed, steps: 1500)
        }
    }

    private struct ModelKey: Hashable, CustomStringConvertible {
        var path: String
        var token: String
        var uid: String?
        var description: String { "\(path)#\(token)#\(uid ?? "-")" }
    }

    private func runRandomSequence(seed: UInt64, steps: Int) throws {
        var random = RetryTestRandom(seed: seed)  // SplitMix64 (RetryTests): a fixed seed, the same sequence every run
        let index = AppIndex(app: "a")
        var model: [ModelKey: SubscriptionSettings] = [:]
        let segments = ["a", "b", "c"]
        var paths = ["/"]
        for first in segments {
            paths.append("/\(first)")
            for second in segments {
                paths.append("/\(first)/\(second)")
                for third in segments { paths.append("/\(first)/\(second)/\(third)") }
            }
        }
        let subscribers = [("t0", nil), ("t1", nil), ("t0", "u0"), ("t2", "u1"), ("t3", "u0")] as [(String, String?)]
        let expiries: [Int64] = [-5, 0, 1, 100, 200, 4_294_967_294, 4_294_967_295, 5_000_000_000, .max]
        var keys: [ModelKey] = []
        for path in paths { for (token, uid) in subscribers { keys.append(ModelKey(path: path, token: token, uid: uid)) } }

        func subscriber(_ key: ModelKey) -> SubscriberKey { SubscriberKey(token: key.token, uid: key.uid) }
        /// Every key subscribed at once, then removed: the top-level maps reach the capacity they keep (counted by
        /// byteCount, never shrunk by a removal), so an empty index counts exactly these bytes from then on.
        func warmUp() throws -> Int {
            for key in keys { index.subscribe(path: try DataPath(key.path), subscriber: subscriber(key), settings: .init(mode: .value, expiresAt: 1, authUID: key.uid)) }
            for key in keys { XCTAssertNotNil(index.unsubscribe(path: try DataPath(key.path), subscriber: subscriber(key))) }
            XCTAssertTrue(index.root.children.isEmpty)
            return index.byteCount
        }
        var empty = try warmUp()
        for step in 0..<steps {
            let context = "seed \(seed) step \(step)"
            let roll = random.next() % 100
            if roll < 45 {
                let key = keys[Int(random.next() % UInt64(keys.count))]
                let settings = SubscriptionSettings(
                    mode: SubscriptionMode.allCases[Int(random.next() % 3)],
                    expiresAt: expiries[Int(random.next() % UInt64(expiries.count))], authUID: key.uid)
                let outcome = index.subscribe(path: try DataPath(key.path), subscriber: subscriber(key), settings: settings)
                XCTAssertEqual(outcome, model[key] == nil ? .created : .refreshed, context)
                model[key] = settings
            } else if roll < 90 {
                // Mostly existing keys (a tombstone of a live subscription), sometimes any key.
                let live = Array(model.keys)
                let key = !live.isEmpty && roll < 80 ? live[Int(random.next() % UInt64(live.count))] : keys[Int(random.next() % UInt64(keys.count))]
                let removed = index.unsubscribe(path: try DataPath(key.path), subscriber: subscriber(key))
                XCTAssertEqual(removed, model.removeValue(forKey: key), context)
            } else if roll < 98 {
                let now = expiries[Int(random.next() % UInt64(expiries.count))] - Int64(random.next() % 2)
                let due = index.expiredSubscriptions(now: now).map { ModelKey(path: $0.path.description, token: $0.subscriber.token, uid: $0.subscriber.uid) }
                let expected = model.filter { $0.value.expiresAt <= now }.keys
                XCTAssertEqual(Set(due), Set(expected), "\(context): expired at \(now)")
                XCTAssertEqual(due.count, expected.count, context)
                if random.next() % 2 == 0 {
                    for key in due { XCTAssertNotNil(index.unsubscribe(path: try DataPath(key.path), subscriber: subscriber(key)), context) }
                    for key in due { model[key] = nil }
                }
            } else {
                XCTAssertEqual(index.removeAll().count, model.count, context)
                model = [:]
                empty = try warmUp()
            }
            try check(index, against: model, keys: keys, context: context)
        }
        for key in Array(model.keys) { XCTAssertNotNil(index.unsubscribe(path: try DataPath(key.path), subscriber: subscriber(key))) }
        XCTAssertTrue(index.root.children.isEmpty, "seed \(seed): everything removed, no node left")
        XCTAssertNil(index.root.payload)
        XCTAssertEqual(index.subscriptionCount, 0)
        XCTAssertEqual(index.byteCount, empty, "seed \(seed): every byte given back")
    }

    private func check(_ index: AppIndex, against model: [ModelKey: SubscriptionSettings], keys: [ModelKey], context: String) throws {
        for key in keys {
            let found = index.subscription(path: try DataPath(key.path), subscriber: SubscriberKey(token: key.token, uid: key.uid))
            XCTAssertEqual(found, model[key], "\(context): \(key)")
        }
        let all = index.allSubscriptions().map { ModelKey(path: $0.path.description, token: $0.subscriber.token, uid: $0.subscriber.uid) }
        XCTAssertEqual(all.count, model.count, context)
        XCTAssertEqual(Set(all), Set(model.keys), context)
        XCTAssertEqual(index.subscriptionCount, model.count, context)
        for uid in ["u0", "u1"] {
            let listed = index.subscriptions(ofUser: uid).map { ModelKey(path: $0.path.description, token: $0.subscriber.token, uid: uid) }
            XCTAssertEqual(Set(listed), Set(model.keys.filter { $0.uid == uid }), "\(context): user \(uid)")
            XCTAssertEqual(index.subscriptionCount(owner: uid), model.keys.filter { $0.uid == uid }.count, context)
        }
        for token in ["t0", "t1", "t2", "t3"] {
            XCTAssertEqual(
                index.subscriptionCount(device: DeviceKey(kind: .mobile, token: ExactString(token))),
                model.keys.filter { $0.token == token }.count, "\(context): device \(token)")
        }
        // Every node but the root leads to a subscriber, and its bound is at or before every expiry below it.
        func visit(_ node: AppIndex.Node, isRoot: Bool) -> (subscribers: Int, earliest: Int64) {
            var subscribers = node.subscriberCount
            var earliest = Int64.max
            node.payload?.subscribers.forEach { _, settings in earliest = min(earliest, settings.expiresAt) }
            node.children.forEach { child in
                let below = visit(child, isRoot: false)
                subscribers += below.subscribers
                earliest = min(earliest, below.earliest)
            }
            if !isRoot { XCTAssertGreaterThan(subscribers, 0, "\(context): an emptied node was left in the trie") }
            XCTAssertLessThanOrEqual(node.earliestExpiry, earliest, "\(context): a bound after an expiry below it")
            return (subscribers, earliest)
        }
        XCTAssertEqual(visit(index.root, isRoot: true).subscribers, model.count, context)
    }
}
