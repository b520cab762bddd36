import XCTest

@testable import PushCore

/// ``DeliveryQueue/Admission/concurrency(_:)`` (a gate): a saturated gate's lines are set aside without taking `due`'s places, the others go
/// out, and the gate's lines come back in their order as it frees places.
extension DeliveryQueueTests {
    /// Gate by the token's prefix before `-` (`slow-1` → `slow`), `limit` places; tokens without `-` have none.
    func gatedQueue(limit: Int) -> DeliveryQueue {
        DeliveryQueue(admissions: { entry in
            let token = entry.subscriber.token
            guard let dash = token.firstIndex(of: "-") else { return [] }
            return [.concurrency(DeliveryQueue.Gate(key: String(token[..<dash]), limit: limit))]
        })
    }

    func testASaturatedGateIsSkippedAndItsLinesComeBackInOrderAsItFreesPlaces() {
        let queue = gatedQueue(limit: 2)
        for index in 0..<5 { queue.enqueue(note(.noData, to: SubscriberKey(token: "slow-\(index)"), at: Double(index))) }
        for index in 0..<3 { queue.enqueue(note(.noData, to: SubscriberKey(token: "fast-\(index)"), at: Double(5 + index))) }
        queue.enqueue(note(.noData, to: SubscriberKey(token: "plain"), at: 8))
        // Four places: two for slow (its limit), the other two for fast; the waiting slow lines took none.
        XCTAssertEqual(queue.due(now: 10, limit: 4).map(\.subscriber.token), ["slow-0", "slow-1", "fast-0", "fast-1"])
        XCTAssertEqual(queue.inFlight(gate: "slow"), 2)
        XCTAssertEqual(queue.parkedCount(gate: "slow"), 3)
        XCTAssertEqual(queue.inFlightCount, 4)
        // fast's third line waits for a fast place; the ungated line goes.
        XCTAssertEqual(queue.due(now: 10).map(\.subscriber.token), ["plain"])
        XCTAssertTrue(queue.due(now: 10).isEmpty)
        XCTAssertNil(queue.nextWakeUp, "set-aside lines do not wake the sender up")
        // A resolved head frees a place: the earliest waiting line of its gate is due again (at its own time).
        queue.completed(key(SubscriberKey(token: "slow-0")))
        XCTAssertEqual(queue.nextWakeUp, 2)
        XCTAssertEqual(queue.due(now: 10).map(\.subscriber.token), ["slow-2"])
        queue.completed(key(SubscriberKey(token: "fast-0")))
        XCTAssertEqual(queue.due(now: 10).map(\.subscriber.token), ["fast-2"])
        // A failure frees the place too; the failed line retries later, behind nothing of its own.
        XCTAssertEqual(fail(queue, key(SubscriberKey(token: "slow-1")), at: 10), .scheduled(at: 11))
        XCTAssertEqual(queue.due(now: 10).map(\.subscriber.token), ["slow-3"])
        queue.completed(key(SubscriberKey(token: "slow-2")))
        // slow-1's retry (at 11) and slow-4 (at 4) compete for the freed place: the earlier goes first.
        XCTAssertEqual(queue.due(now: 11).map(\.subscriber.token), ["slow-4"])
        queue.completed(key(SubscriberKey(token: "slow-3")))
        XCTAssertEqual(queue.due(now: 11).map(\.subscriber.token), ["slow-1"])
        XCTAssertEqual(queue.inFlight(gate: "slow"), 2)
        for token in ["slow-4", "slow-1", "fast-1", "fast-2", "plain"] { queue.completed(key(SubscriberKey(token: token))) }
        XCTAssertEqual(queue.count, 0)
        XCTAssertEqual(queue.inFlight(gate: "slow"), 0)
        XCTAssertEqual(queue.parkedCount(gate: "slow"), 0, "an idle gate is forgotten")
    }

    func testAGatedSubscriptionKeepsItsOwnOrder() {
        let queue = gatedQueue(limit: 1)
        let slow = SubscriberKey(token: "slow-a")
        queue.enqueue(note(.value(.number("1")), to: slow, origin: "1"))
        queue.enqueue(note(.value(.number("2")), to: slow, origin: "2"))
        queue.enqueue(note(.noData, to: SubscriberKey(token: "slow-b"), origin: "b"))
        XCTAssertEqual(queue.due(now: 0).map(\.origin), ["1"])
        XCTAssertTrue(queue.due(now: 0).isEmpty)
        queue.completed(key(slow))
        // Freed: b (set aside earlier) and slow-a's second entry compete; b was due first.
        XCTAssertEqual(queue.due(now: 0).map(\.origin), ["b"])
        queue.completed(key(SubscriberKey(token: "slow-b")))
        XCTAssertEqual(queue.due(now: 0).map(\.origin), ["2"])
    }

    func testARemovedLineThatWasPutBackDoesNotStrandTheOthers() {
        let queue = gatedQueue(limit: 1)
        for name in ["a", "b", "c"] { queue.enqueue(note(.noData, to: SubscriberKey(token: "slow-\(name)"))) }
        XCTAssertEqual(queue.due(now: 0).map(\.subscriber.token), ["slow-a"])
        XCTAssertTrue(queue.due(now: 0).isEmpty)
        queue.completed(key(SubscriberKey(token: "slow-a")))  // puts b back
        XCTAssertEqual(queue.removeAll(forSubscription: key(SubscriberKey(token: "slow-b"))).count, 1)
        XCTAssertEqual(queue.due(now: 0).map(\.subscriber.token), ["slow-c"])
    }

    func testAGatedWorkloadNeverExceedsTheLimitAndDeliversEverythingInOrder() {
        // Seeded: 40 subscriptions over 4 gates of 3 places, failures and coalescing; a gate never has more than
        // 3 in flight, every subscription's deliveries come in order and end with its latest notification.
        let queue = gatedQueue(limit: 3)
        runSeededWorkload(queue, seed: 7, prefix: "g", step: 0.25) {
            for gate in 0..<4 { XCTAssertLessThanOrEqual(queue.inFlight(gate: "g\(gate)"), 3) }
        }
    }

    /// 3000 notifications to 40 subscriptions (token `<prefix><n % 4>-<n>`), at most 8 in flight, heads resolved in
    /// a random order (a quarter failed), `step` seconds apart, then the rest following the queue's wake-ups;
    /// `checkLimits` after each `due`. Every subscription's deliveries come in order and end with its latest.
    func runSeededWorkload(_ queue: DeliveryQueue, seed: UInt64, prefix: String, step: Double, checkLimits: () -> Void) {
        var rng = RetryTestRandom(seed: seed)
        var latest: [RetryKey: Int] = [:]
        var delivered: [RetryKey: [Int]] = [:]
        var inFlight: [PendingNotification] = []
        var now = 0.0
        for serial in 0..<3000 {
            let subscription = Int.random(in: 0..<40, using: &rng)
            let subscriber = SubscriberKey(token: "\(prefix)\(subscription % 4)-\(subscription)")
            let item = note(Bool.random(using: &rng) ? .noData : .value(nil), to: subscriber, at: now, origin: "\(serial)")
            queue.enqueue(item)
            latest[item.key] = serial
            inFlight += queue.due(now: now, limit: 8 - queue.inFlightCount)
            checkLimits()
            // Resolve some of the heads in flight, in a random order.
            inFlight.shuffle(using: &rng)
            while let pending = inFlight.last, Int.random(in: 0..<3, using: &rng) != 0 {
                inFlight.removeLast()
                if Int.random(in: 0..<4, using: &rng) == 0 {
                    guard case .scheduled = fail(queue, pending.key, at: now) else { return XCTFail("not scheduled") }
                } else {
                    delivered[pending.key, default: []].append(Int(pending.origin) ?? -1)
                    queue.completed(pending.key)
                }
            }
            now += step
        }
        var turns = 0
        while queue.count > 0, turns < 100_000 {
            turns += 1
            inFlight += queue.due(now: now, limit: 8 - queue.inFlightCount)
            checkLimits()
            guard let pending = inFlight.popLast() else {
                guard let wake = queue.nextWakeUp else { return XCTFail("lines left that nothing wakes up") }
                now = max(now, wake)
                continue
            }
            delivered[pending.key, default: []].append(Int(pending.origin) ?? -1)
            queue.completed(pending.key)
        }
        XCTAssertEqual(queue.count, 0)
        XCTAssertEqual(queue.inFlightCount, 0)
        XCTAssertEqual(Set(delivered.keys), Set(latest.keys))
        for (key, serials) in delivered {
            XCTAssertEqual(serials, serials.sorted())
            XCTAssertEqual(serials.last, latest[key])
        }
    }
}
