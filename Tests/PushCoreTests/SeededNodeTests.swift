import XCTest

@testable import PushCore

/// A node holds a shadow only once it is seeded (issue 19): it then changes class (``AppIndex/SeededPayload``) in
/// its parent's place, after the event's walk of the trie, and changes back when its last subscriber that needs data
/// goes. Nothing else about the trie may change on the way.
final class SeededNodeTests: XCTestCase {
    private func path(_ text: String) throws -> DataPath { try DataPath(text) }

    private func set(_ index: AppIndex, _ at: String, _ value: JSONValue) throws -> [MatchedNotification] {
        index.apply(ChangeEvent(app: "a", path: try path(at), operation: .set, after: value), now: 0)
    }

    private func number(_ text: String) -> JSONValue { .number(text) }

    /// One write above nested subscriptions seeds them all in one walk (the root too: it has no parent), each with
    /// its part of the write; later writes change the shadows in place; a node whose last `value` subscriber goes is
    /// no longer seeded and keeps its children and other subscribers; every byte comes back at the end.
    func testOneWriteSeedsNestedNodesAndTheTrieStaysWhole() throws {
        let index = AppIndex(app: "a")
        let empty = index.byteCount
        let value = SubscriptionSettings(mode: .value, expiresAt: .max)
        let plain = SubscriptionSettings(mode: .noData, expiresAt: .max)
        let data = ["/", "/a", "/a/b", "/a/b/c", "/a/x"]
        for at in data { index.subscribe(path: try path(at), subscriber: SubscriberKey(token: "device-\(at)"), settings: value) }
        index.subscribe(path: try path("/a/b"), subscriber: SubscriberKey(token: "no-data-device"), settings: plain)
        let unseeded = index.byteCount
        let root: JSONValue = .object(["a": .object(["b": .object(["c": number("1"), "d": number("2")]), "x": .string("y")])])
        XCTAssertEqual(try set(index, "/", root).count, data.count + 1)
        var expected = unseeded
        for at in data {
            let shadow = try XCTUnwrap(index.shadow(at: try path(at)), at)
            XCTAssertEqual(shadow, root.value(at: try path(at).segments), at)
            XCTAssertTrue(try XCTUnwrap(index.node(at: try path(at))?.payload).isSeeded, at)
            expected += AppIndex.seededBytes + HeapCost.json(shadow)
        }
        XCTAssertEqual(index.byteCount, expected)
        XCTAssertEqual(index.allSubscriptions().count, data.count + 1)

        // In place: the nodes are seeded already.
        let seededNode = try XCTUnwrap(index.node(at: try path("/a/b")))
        _ = try set(index, "/a/b/c", number("3"))
        XCTAssertTrue(index.node(at: try path("/a/b")) === seededNode)
        XCTAssertEqual(index.shadow(at: try path("/a/b")), .object(["c": number("3"), "d": number("2")]))
        XCTAssertEqual(index.shadow(at: try path("/a/b/c")), number("3"))

        // The last value subscriber at /a/b goes: the node is a plain payload again, its other subscriber and its
        // child stay.
        index.unsubscribe(path: try path("/a/b"), subscriber: SubscriberKey(token: "device-/a/b"))
        let unseededNode = try XCTUnwrap(index.node(at: try path("/a/b"))?.payload)
        XCTAssertFalse(unseededNode.isSeeded)
        XCTAssertNil(index.shadow(at: try path("/a/b")))
        XCTAssertNotNil(index.subscription(path: try path("/a/b"), subscriber: SubscriberKey(token: "no-data-device")))
        XCTAssertEqual(index.shadow(at: try path("/a/b/c")), number("3"))
        let below = try set(index, "/a/b/c", number("4"))
        XCTAssertEqual(Set(below.map(\.path.description)), ["/", "/a", "/a/b", "/a/b/c"])
        XCTAssertEqual(index.shadow(at: try path("/a")), .object(["b": .object(["c": number("4"), "d": number("2")]), "x": .string("y")]))

        // A value subscriber again at /a/b: not seeded until a write at or above it.
        index.subscribe(path: try path("/a/b"), subscriber: SubscriberKey(token: "device-/a/b"), settings: value)
        XCTAssertNil(index.shadow(at: try path("/a/b")))
        _ = try set(index, "/a", .object(["b": .object(["c": number("5")])]))
        XCTAssertEqual(index.shadow(at: try path("/a/b")), .object(["c": number("5")]))
        XCTAssertEqual(index.shadow(at: try path("/a/x")), .null)

        for subscription in index.allSubscriptions() { index.unsubscribe(path: subscription.path, subscriber: subscription.subscriber) }
        XCTAssertEqual(index.subscriptionCount, 0)
        XCTAssertTrue(index.root.children.isEmpty)
        XCTAssertLessThan(index.byteCount - empty, 1024, "only the tables' kept capacity is left")
    }

    /// Random subscribes, unsubscribes and writes over a small tree, from fixed seeds, against a model database: a
    /// seeded shadow always equals the data at its node, only nodes with a subscriber that needs data keep one, the
    /// subscriptions are the model's, and after a write at the root every such node is seeded.
    func testShadowsFollowTheDataThroughRandomSteps() throws {
        let paths = ["/", "/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f"]
        let tokens = ["t0", "t1", "t2"]
        let modes: [SubscriptionMode] = [.noData, .value, .childEvent]
        let keys: [ExactString] = ["a", "b", "c", "d", "e", "f"]
        for seed: UInt64 in [3, 17, 2026] {
            var random = RetryTestRandom(seed: seed)
            func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
            func randomValue(depth: Int) -> JSONValue {
                if depth == 0 || random.next() % 3 == 0 { return random.next() % 5 == 0 ? .null : number(String(random.next() % 100)) }
                var members: [ExactString: JSONValue] = [:]
                for _ in 0..<(1 + Int(random.next() % 3)) { members[pick(keys)] = randomValue(depth: depth - 1) }
                return JSONValue.object(members).normalized()
            }
            let index = AppIndex(app: "a")
            let empty = index.byteCount
            var database: JSONValue = .null
            var model: [String: [String: SubscriptionMode]] = [:]
            for step in 0..<600 {
                let at = pick(paths)
                let token = pick(tokens)
                let context = "seed \(seed) step \(step) at \(at)"
                switch random.next() % 10 {
                case 0..<4:
                    let mode = pick(modes)
                    index.subscribe(path: try path(at), subscriber: SubscriberKey(token: token), settings: .init(mode: mode, expiresAt: .max))
                    model[at, default: [:]][token] = mode
                case 4..<6:
                    let removed = index.unsubscribe(path: try path(at), subscriber: SubscriberKey(token: token))
                    XCTAssertEqual(removed?.mode, model[at]?[token], context)
                    model[at]?[token] = nil
                default:
                    let written = at == "/" && random.next() % 2 == 0 ? randomValue(depth: 3) : randomValue(depth: 2)
                    _ = try set(index, at, written)
                    database = database.setting(written, at: try path(at).segments)
                }
                for node in paths {
                    let needsData = model[node]?.values.contains { $0.needsData } ?? false
                    let shadow = index.shadow(at: try path(node))
                    if !needsData { XCTAssertNil(shadow, "\(context): \(node) keeps no shadow") }
                    if let shadow { XCTAssertEqual(shadow.normalized(), database.value(at: try path(node).segments), "\(context): \(node)") }
                }
                let held = Set(index.allSubscriptions().map { "\($0.path) \($0.subscriber.token) \($0.settings.mode)" })
                let expected = Set(model.flatMap { node, tokens in tokens.map { "\(node) \($0.key) \($0.value)" } })
                XCTAssertEqual(held, expected, context)
            }
            _ = try set(index, "/", database)
            for node in paths where model[node]?.values.contains(where: \.needsData) ?? false {
                XCTAssertEqual(index.shadow(at: try path(node))?.normalized(), database.value(at: try path(node).segments), "seed \(seed): \(node)")
            }
            for subscription in index.allSubscriptions() { index.unsubscribe(path: subscription.path, subscriber: subscription.subscriber) }
            XCTAssertLessThan(index.byteCount - empty, 1024, "seed \(seed)")
        }
    }
}
