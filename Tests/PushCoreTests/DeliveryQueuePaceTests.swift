import XCTest

@testable import PushCore

/// ``DeliveryQueue/Admission/rate(_:)`` (a pace): a provider project's send rate. Its due lines wait for tokens in their order, without
/// holding up other lines; the queue wakes its sender at the next token. (The clock is passed in: no timing.)
extension DeliveryQueueTests {
    /// Pace by the token's prefix before `-` (`p-1` → `p`), `rate` per second with `burst`; tokens without `-`
    /// are unpaced. `rates` overrides the rate of some paces.
    func pacedQueue(rate: Double, burst: Int, rates: [String: Double] = [:]) -> DeliveryQueue {
        DeliveryQueue(admissions: { entry in
            let token = entry.subscriber.token
            guard let dash = token.firstIndex(of: "-") else { return [] }
            let key = String(token[..<dash])
            return [.rate(DeliveryQueue.Pace(key: key, rate: rates[key] ?? rate, burst: burst))]
        })
    }

    func testAPacedProjectSpreadsItsSendsAndWakesTheSenderAtEachToken() {
        let queue = pacedQueue(rate: 10, burst: 1)
        for index in 0..<20 { queue.enqueue(note(.noData, to: SubscriberKey(token: "p-\(index)"), at: 0)) }
        // Follow the queue's own wake-ups, as the delivery loop does: one send per token, 0.1 s apart, in order.
        var now = 0.0
        var sent: [(String, Double)] = []
        var turns = 0
        while let next = queue.nextWakeUp, turns < 100 {
            turns += 1
            now = max(now, next)
            for entry in queue.due(now: now) {
                sent.append((entry.subscriber.token, now))
                queue.completed(entry.key)
            }
        }
        XCTAssertEqual(sent.map(\.0), (0..<20).map { "p-\($0)" }, "in their order")
        for (index, (_, time)) in sent.enumerated() {
            XCTAssertEqual(time, Double(index) * 0.1, accuracy: 1e-9, "send \(index) waits for its token, no longer")
        }
        XCTAssertEqual(turns, 20, "one wake-up per token: the sender neither spins nor oversleeps")
        XCTAssertEqual(queue.takePacedSends(), ["p": 19], "every send but the first waited for the pace")
        XCTAssertEqual(queue.waitingCount(pace: "p"), 0)
    }

    func testLinesOfOtherProjectsAreNotHeldUpByAPacedOne() {
        let queue = pacedQueue(rate: 1, burst: 2, rates: ["q": 100])
        for index in 0..<5 { queue.enqueue(note(.noData, to: SubscriberKey(token: "p-\(index)"), at: 0)) }
        queue.enqueue(note(.noData, to: SubscriberKey(token: "q-0"), at: 1))
        queue.enqueue(note(.noData, to: SubscriberKey(token: "plain"), at: 2))
        // p's burst goes; its other lines wait without taking the places of `limit`.
        XCTAssertEqual(queue.due(now: 2, limit: 4).map(\.subscriber.token), ["p-0", "p-1", "q-0", "plain"])
        XCTAssertEqual(queue.waitingCount(pace: "p"), 3)
        XCTAssertEqual(queue.due(now: 2).map(\.subscriber.token), [], "p has no token before 3")
        XCTAssertEqual(queue.nextWakeUp, 3)
        queue.enqueue(note(.noData, to: SubscriberKey(token: "q-1"), at: 2))
        XCTAssertEqual(queue.due(now: 2).map(\.subscriber.token), ["q-1"], "a later line of another project goes at once")
        // Two tokens came by 5 (the burst): the earliest waiting lines take them.
        XCTAssertEqual(queue.due(now: 5).map(\.subscriber.token), ["p-2", "p-3"])
        XCTAssertEqual(queue.nextWakeUp, 6)
        XCTAssertEqual(queue.due(now: 6).map(\.subscriber.token), ["p-4"])
        XCTAssertNil(queue.nextWakeUp, "everything is in flight")
    }

    func testAPacedSubscriptionKeepsItsOwnOrderAndALaterLineDoesNotOvertake() {
        let queue = pacedQueue(rate: 1, burst: 1)
        let alice = SubscriberKey(token: "p-alice")
        for origin in ["1", "2", "3"] { queue.enqueue(note(.value(.number(origin)), to: alice, origin: origin)) }
        XCTAssertEqual(queue.due(now: 0).map(\.origin), ["1"])
        queue.completed(key(alice))
        XCTAssertTrue(queue.due(now: 0.5).isEmpty, "its next notification waits for the next token")
        // A line that becomes due later queues behind the waiting one, even when the token is there at its turn.
        queue.enqueue(note(.noData, to: SubscriberKey(token: "p-bob"), at: 0.9, origin: "bob"))
        XCTAssertEqual(queue.due(now: 1).map(\.origin), ["2"])
        queue.completed(key(alice))
        XCTAssertEqual(queue.due(now: 2).map(\.origin), ["bob"])
        XCTAssertEqual(queue.due(now: 3).map(\.origin), ["3"])
    }

    func testARetryAndAProjectPauseStillApplyToAPacedLine() {
        let queue = pacedQueue(rate: 1, burst: 1)
        let alice = SubscriberKey(token: "p-alice")
        queue.enqueue(note(.noData, to: alice))
        XCTAssertEqual(queue.due(now: 0).count, 1)
        // QUOTA_EXCEEDED: the head retries after the pause of its project, then takes a token like any other.
        XCTAssertEqual(fail(queue, key(alice), at: 0, retryAfter: 60, quota: true), .scheduled(at: 60))
        queue.pause(scope: "fcm:p1", until: 60)
        queue.enqueue(note(.noData, to: SubscriberKey(token: "p-bob"), at: 1))
        XCTAssertTrue(queue.due(now: 30).isEmpty, "the pause holds the project's lines")
        XCTAssertEqual(queue.nextWakeUp, 60)
        XCTAssertEqual(queue.due(now: 60).map(\.subscriber.token), ["p-alice"])
        XCTAssertEqual(queue.nextWakeUp, 61, "bob waits for the next token")
        XCTAssertEqual(queue.due(now: 61).map(\.subscriber.token), ["p-bob"])
    }

    func testARemovedWaitingLineGivesItsTurnToTheNextAndAChangedRateApplies() {
        var rate = 1.0
        let queue = DeliveryQueue(admissions: { _ in [.rate(DeliveryQueue.Pace(key: "p", rate: rate, burst: 1))] })
        for name in ["a", "b", "c", "d"] { queue.enqueue(note(.noData, to: SubscriberKey(token: name))) }
        XCTAssertEqual(queue.due(now: 0).map(\.subscriber.token), ["a"])
        queue.removeAll(forSubscription: key(SubscriberKey(token: "b")))
        XCTAssertEqual(queue.due(now: 1).map(\.subscriber.token), ["c"], "b's place is not kept for nothing")
        // A new rate starts a new bucket (full: one token now), then spaces sends by the new rate.
        rate = 4
        queue.enqueue(note(.noData, to: SubscriberKey(token: "e"), at: 1))
        XCTAssertEqual(queue.due(now: 1).map(\.subscriber.token), ["d"])
        XCTAssertEqual(queue.pace("p")?.rate, 4)
        XCTAssertEqual(queue.nextWakeUp, 1.25)
        XCTAssertEqual(queue.due(now: 1.25).map(\.subscriber.token), ["e"])
    }

    func testAQuotaBecomesAPaceThatNoWindowOfTheQuotaExceeds() throws {
        // FCM's default: 600,000 a minute. A burst of 100 ms of sends; the rate lowered by it.
        let fcm = try XCTUnwrap(DeliveryQueue.Pace.quota(key: "fcm:p", sends: 600_000, per: 60))
        XCTAssertEqual(fcm.burst, 1000)
        XCTAssertEqual(Double(fcm.burst) + fcm.rate * 60, 600_000, accuracy: 1e-6)
        // A per-second quota: the burst is at most 2 % of it.
        let hms = try XCTUnwrap(DeliveryQueue.Pace.quota(key: "hms:a", sends: 500, per: 1))
        XCTAssertEqual(hms.burst, 10)
        XCTAssertEqual(hms.rate, 490, accuracy: 1e-9)
        XCTAssertNil(DeliveryQueue.Pace.quota(key: "x", sends: 0, per: 60), "0: unpaced")
        // Any window of 60 s of sends at that pace holds at most the quota (tokens: burst + rate × window).
        var bucket = TokenBucket(rate: fcm.rate, burst: fcm.burst)
        var admitted = 0
        var time = 0.0
        while time < 60 {
            if bucket.take(now: time) == .admitted { admitted += 1 }
            time += 1.0 / 20_000
        }
        XCTAssertLessThanOrEqual(admitted, 600_000)
    }
}
