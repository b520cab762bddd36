import XCTest

@testable import PushCore

/// SplitMix64: a deterministic generator for reproducible jitter.
struct RetryTestRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476C_E5B9_E7B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

final class RetryPolicyTests: XCTestCase {
    let exact = RetryPolicy(jitter: 0)

    func testScheduleDoublesFromOneSecondUpToTheCap() {
        var random = RetryTestRandom(seed: 1)
        let delays = (1...13).map { exact.delay(attempt: $0, retryAfter: nil, quotaExceeded: false, random: &random) }
        XCTAssertEqual(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600, 600])
        XCTAssertEqual(exact.backoff(attempt: 0), 1)
        XCTAssertEqual(exact.backoff(attempt: -5), 1)
        XCTAssertEqual(exact.backoff(attempt: Int.max), 600)
    }

    func testJitterStaysWithinTwentyPercentAndUnderTheCap() {
        let policy = RetryPolicy.standard
        for seed in UInt64(0)..<200 {
            var random = RetryTestRandom(seed: seed)
            var previousUpper = 0.0
            for attempt in 1...15 {
                let nominal = policy.backoff(attempt: attempt)
                let delay = policy.delay(attempt: attempt, retryAfter: nil, quotaExceeded: false, random: &random)
                XCTAssertGreaterThanOrEqual(delay, nominal * 0.8)
                XCTAssertLessThanOrEqual(delay, min(nominal * 1.2, 600))
                if nominal < 600 { XCTAssertGreaterThan(nominal * 0.8, previousUpper * 0.99) }
                previousUpper = nominal * 1.2
            }
        }
        // Jitter actually spreads.
        var a = RetryTestRandom(seed: 7)
        let spread = Set((0..<20).map { _ in policy.delay(attempt: 3, retryAfter: nil, quotaExceeded: false, random: &a) })
        XCTAssertGreaterThan(spread.count, 10)
    }

    func testSameSeedGivesSameSchedule() {
        var a = RetryTestRandom(seed: 42)
        var b = RetryTestRandom(seed: 42)
        for attempt in 1...10 {
            XCTAssertEqual(
                RetryPolicy.standard.delay(attempt: attempt, retryAfter: nil, quotaExceeded: false, random: &a),
                RetryPolicy.standard.delay(attempt: attempt, retryAfter: nil, quotaExceeded: false, random: &b))
        }
    }

    func testRetryAfterIsNeverUndercut() {
        var random = RetryTestRandom(seed: 3)
        for seed in UInt64(0)..<50 {
            random = RetryTestRandom(seed: seed)
            XCTAssertGreaterThanOrEqual(
                RetryPolicy.standard.delay(attempt: 1, retryAfter: 30, quotaExceeded: false, random: &random), 30)
        }
        // Longer than the backoff cap: still honoured.
        XCTAssertEqual(exact.delay(attempt: 12, retryAfter: 1800, quotaExceeded: false, random: &random), 1800)
        // Shorter than the backoff: the backoff wins.
        XCTAssertEqual(exact.delay(attempt: 5, retryAfter: 3, quotaExceeded: false, random: &random), 16)
        // Nonsense is ignored.
        XCTAssertEqual(exact.delay(attempt: 2, retryAfter: -10, quotaExceeded: false, random: &random), 2)
        XCTAssertEqual(exact.delay(attempt: 2, retryAfter: .nan, quotaExceeded: false, random: &random), 2)
    }

    func testQuotaExceededWaitsAtLeastSixtySeconds() {
        var random = RetryTestRandom(seed: 9)
        for attempt in 1...6 {
            XCTAssertEqual(RetryPolicy.standard.delay(attempt: attempt, retryAfter: nil, quotaExceeded: true, random: &random), 60)
        }
        XCTAssertEqual(exact.delay(attempt: 8, retryAfter: nil, quotaExceeded: true, random: &random), 128)
        XCTAssertEqual(exact.delay(attempt: 1, retryAfter: 90, quotaExceeded: true, random: &random), 90)
    }

    func testNothingIsScheduledPastTwoHoursAfterTheFirstFailure() {
        var random = RetryTestRandom(seed: 5)
        XCTAssertEqual(
            exact.nextAttempt(firstFailureAt: 1000, now: 1000, attempt: 1, retryAfter: nil, quotaExceeded: false, random: &random),
            1001)
        XCTAssertEqual(
            exact.nextAttempt(firstFailureAt: 0, now: 6000, attempt: 20, retryAfter: nil, quotaExceeded: false, random: &random),
            6600)
        // Exactly at the deadline is still allowed; later is not.
        XCTAssertEqual(
            exact.nextAttempt(firstFailureAt: 0, now: 6600, attempt: 20, retryAfter: nil, quotaExceeded: false, random: &random),
            7200)
        XCTAssertNil(
            exact.nextAttempt(firstFailureAt: 0, now: 7000, attempt: 20, retryAfter: nil, quotaExceeded: false, random: &random))
        XCTAssertNil(
            exact.nextAttempt(firstFailureAt: 0, now: 100, attempt: 1, retryAfter: 7200, quotaExceeded: false, random: &random))
        XCTAssertNil(
            exact.nextAttempt(
                firstFailureAt: 0, now: 100, attempt: 1, retryAfter: .infinity, quotaExceeded: false, random: &random))
    }

    func testAFailingSubscriptionIsRetriedTwentyTimesInTwoHours() {
        // 1 + 2 + … + 512 = 1023 s, then every 600 s until 7200 s: 10 + 10 attempts (exact schedule).
        var random = RetryTestRandom(seed: 11)
        var now = 0.0
        var attempt = 1
        var retries = 0
        while let next = exact.nextAttempt(
            firstFailureAt: 0, now: now, attempt: attempt, retryAfter: nil, quotaExceeded: false, random: &random)
        {
            now = next
            attempt += 1
            retries += 1
        }
        XCTAssertEqual(retries, 20)
        XCTAssertLessThanOrEqual(now, 7200)
    }
}

final class ChildChangesMergeTests: XCTestCase {
    func testMergeRules() {
        let one = JSONValue.number("1")
        let two = JSONValue.number("2")
        // added then changed → added with the new value
        XCTAssertEqual(ChildChanges(added: ["a": one]).merged(with: ChildChanges(changed: ["a": two])), ChildChanges(added: ["a": two]))
        // added then removed → gone
        XCTAssertTrue(ChildChanges(added: ["a": one]).merged(with: ChildChanges(removed: ["a"])).isEmpty)
        // removed then added → changed
        XCTAssertEqual(ChildChanges(removed: ["a"]).merged(with: ChildChanges(added: ["a": two])), ChildChanges(changed: ["a": two]))
        // changed then removed → removed
        XCTAssertEqual(ChildChanges(changed: ["a": one]).merged(with: ChildChanges(removed: ["a"])), ChildChanges(removed: ["a"]))
        // changed then changed → the later value wins
        XCTAssertEqual(ChildChanges(changed: ["a": one]).merged(with: ChildChanges(changed: ["a": two])), ChildChanges(changed: ["a": two]))
        // removed then removed → removed
        XCTAssertEqual(ChildChanges(removed: ["a"]).merged(with: ChildChanges(removed: ["a"])), ChildChanges(removed: ["a"]))
        // unrelated keys combine; removed stays sorted
        XCTAssertEqual(
            ChildChanges(added: ["x": one], removed: ["z"]).merged(with: ChildChanges(removed: ["b"], changed: ["y": two])),
            ChildChanges(added: ["x": one], removed: ["b", "z"], changed: ["y": two]))
        // add, remove, add again → added with the last value
        let thrice = ChildChanges(added: ["a": one]).merged(with: ChildChanges(removed: ["a"]))
            .merged(with: ChildChanges(added: ["a": two]))
        XCTAssertEqual(thrice, ChildChanges(added: ["a": two]))
    }

    func testContentCoalescing() {
        XCTAssertEqual(NotificationContent.noData.coalescing(with: .noData), .combined(.noData))
        XCTAssertEqual(NotificationContent.value(.number("1")).coalescing(with: .value(nil)), .combined(.value(nil)))
        XCTAssertEqual(NotificationContent.noData.coalescing(with: .value(nil)), .keepBoth)
        XCTAssertEqual(NotificationContent.revoke(.expired).coalescing(with: .revoke(.expired)), .keepBoth)
        XCTAssertEqual(NotificationContent.noData.coalescing(with: .revoke(.disabled)), .keepBoth)
        let a = NotificationContent.childEvent(ChildChanges(added: ["k": .bool(false)]), keysOnly: false)
        let b = NotificationContent.childEvent(ChildChanges(changed: ["j": .bool(true)]), keysOnly: true)
        XCTAssertEqual(
            a.coalescing(with: b),
            .combined(.childEvent(ChildChanges(added: ["k": .bool(false)], changed: ["j": .bool(true)]), keysOnly: true)))
        XCTAssertEqual(a.coalescing(with: .childEvent(ChildChanges(removed: ["k"]), keysOnly: false)), .cancelled)
    }
}

final class DeliveryQueueTests: XCTestCase {
    let policy = RetryPolicy(jitter: 0)
    var random = RetryTestRandom(seed: 2024)

    static let alice = SubscriberKey(token: "alice")
    static let bob = SubscriberKey(token: "bob")

    static func path(_ text: String) -> DataPath { DataPath(validatedSegments: text.split(separator: "/").map { ExactString(String($0)) }) }

    func note(
        _ content: NotificationContent, to subscriber: SubscriberKey = alice, path: String = "/a", scope: String = "fcm:p1",
        at time: Double = 0, origin: String = ""
    ) -> PendingNotification {
        PendingNotification(
            app: "app", path: Self.path(path), subscriber: subscriber, format: .v1, content: content, scope: scope,
            origin: origin, firstFailureAt: time)
    }

    func key(_ subscriber: SubscriberKey = alice, path: String = "/a") -> RetryKey {
        RetryKey(app: "app", path: Self.path(path), subscriber: subscriber)
    }

    func fail(_ queue: DeliveryQueue, _ key: RetryKey, at now: Double, retryAfter: Double? = nil, quota: Bool = false)
        -> DeliveryQueue.FailureOutcome
    {
        queue.failed(key, now: now, retryAfter: retryAfter, quotaExceeded: quota, policy: policy, random: &random)
    }

    func testBackoffScheduleThroughTheQueue() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.noData, at: 100))
        XCTAssertEqual(queue.nextWakeUp, 100)
        XCTAssertEqual(queue.due(now: 100).count, 1)
        XCTAssertEqual(fail(queue, key(), at: 100), .scheduled(at: 101))
        XCTAssertEqual(queue.pending(for: key()).first?.firstFailureAt, 100)
        XCTAssertEqual(queue.nextWakeUp, 101)
        XCTAssertTrue(queue.due(now: 100.5).isEmpty)
        XCTAssertEqual(queue.due(now: 101).first?.attempt, 1)
        XCTAssertEqual(fail(queue, key(), at: 101), .scheduled(at: 103))
        XCTAssertEqual(queue.due(now: 103).count, 1)
        XCTAssertEqual(fail(queue, key(), at: 103), .scheduled(at: 107))
        XCTAssertEqual(queue.due(now: 107).count, 1)
        XCTAssertEqual(fail(queue, key(), at: 107, retryAfter: 50), .scheduled(at: 157))
        XCTAssertEqual(queue.due(now: 157).count, 1)
        XCTAssertEqual(fail(queue, key(), at: 157, quota: true), .scheduled(at: 217))
        XCTAssertEqual(queue.due(now: 217).count, 1)
        queue.completed(key())
        XCTAssertEqual(queue.count, 0)
        XCTAssertNil(queue.nextWakeUp)
        XCTAssertFalse(queue.hasPending(for: key()))
    }

    func testJitteredQueueScheduleStaysInBounds() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.noData))
        var now = 0.0
        for attempt in 1...12 {
            XCTAssertEqual(queue.due(now: now).count, 1)
            guard case .scheduled(let at) = queue.failed(key(), now: now, policy: .standard, random: &random) else {
                return XCTFail("not scheduled at attempt \(attempt)")
            }
            let nominal = RetryPolicy.standard.backoff(attempt: attempt)
            XCTAssertGreaterThanOrEqual(at - now, nominal * 0.8 - 1e-9)
            XCTAssertLessThanOrEqual(at - now, min(nominal * 1.2, 600) + 1e-9)
            now = at
        }
    }

    func testTwoHourCutOffDiscardsEverythingPendingAndCountsIt() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.value(.number("1"))))
        XCTAssertEqual(queue.due(now: 0).count, 1)
        var now = 0.0
        var outcome = fail(queue, key(), at: now)
        queue.enqueue(note(.childEvent(ChildChanges(added: ["x": .null]), keysOnly: false), at: 5))  // a different kind: kept
        while case .scheduled(let at) = outcome {
            now = at
            XCTAssertEqual(queue.due(now: now).map(\.content), [.value(.number("1"))])
            outcome = fail(queue, key(), at: now)
        }
        guard case .discarded(let discarded) = outcome else { return XCTFail("not discarded") }
        XCTAssertEqual(discarded.count, 2)
        XCTAssertLessThanOrEqual(now, 7200)
        XCTAssertGreaterThan(now + 600, 7200)
        XCTAssertEqual(queue.count, 0)
        XCTAssertEqual(queue.inFlightCount, 0)
        XCTAssertNil(queue.nextWakeUp)
        // The subscription is not affected: new notifications queue again.
        XCTAssertEqual(queue.enqueue(note(.noData, at: 8000)), .queued)
        XCTAssertEqual(queue.due(now: 8000).count, 1)
    }

    func testFirstFailureIsKeptAcrossAttempts() {
        let queue = DeliveryQueue()
        queue.enqueue(PendingNotification(
            app: "app", path: Self.path("/a"), subscriber: Self.alice, format: .v2, content: .noData,
            firstFailureAt: 50, attempt: 1, notBefore: 51))
        XCTAssertTrue(queue.due(now: 50).isEmpty)
        XCTAssertEqual(queue.due(now: 51).first?.firstFailureAt, 50)
        XCTAssertEqual(fail(queue, key(), at: 51), .scheduled(at: 53))
        XCTAssertEqual(queue.pending(for: key()).first?.firstFailureAt, 50)
        XCTAssertEqual(queue.pending(for: key()).first?.attempt, 2)
    }

    func testOrderIsKeptPerSubscription() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.value(.number("1")), origin: "e1"))
        queue.enqueue(note(.childEvent(ChildChanges(added: ["k": .bool(true)]), keysOnly: false), origin: "e2"))
        queue.enqueue(note(.noData, origin: "e3"))
        queue.enqueue(note(.value(nil), origin: "e4"))
        XCTAssertEqual(queue.count, 4)
        var delivered: [String] = []
        var now = 0.0
        var failedOnce = false
        while !queue.isEmpty {
            let batch = queue.due(now: now)
            XCTAssertLessThanOrEqual(batch.count, 1)
            for item in batch {
                if item.origin == "e2" && !failedOnce {
                    failedOnce = true
                    _ = fail(queue, key(), at: now)
                } else {
                    delivered.append(item.origin)
                    queue.completed(key())
                }
            }
            now += 1
        }
        XCTAssertEqual(delivered, ["e1", "e2", "e3", "e4"])
    }

    func testAtMostOneInFlightPerSubscription() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.value(.number("1"))))
        queue.enqueue(note(.noData))
        queue.enqueue(note(.noData, to: Self.bob))
        let first = queue.due(now: 0)
        XCTAssertEqual(Set(first.map(\.subscriber.token)), ["alice", "bob"])
        XCTAssertTrue(queue.due(now: 10).isEmpty)
        XCTAssertTrue(queue.isInFlight(key()))
        XCTAssertEqual(queue.inFlightCount, 2)
        XCTAssertNil(queue.nextWakeUp)
        queue.completed(key())
        XCTAssertEqual(queue.due(now: 10).map(\.content), [.noData])
        XCTAssertTrue(queue.due(now: 10).isEmpty)
        queue.completed(key())
        queue.completed(key(Self.bob))
        XCTAssertEqual(queue.count, 0)
        // Resolving what is not in flight is harmless.
        queue.completed(key())
        XCTAssertEqual(fail(queue, key(), at: 20), .superseded)
    }

    func testDueRespectsLimitAndTimeOrder() {
        let queue = DeliveryQueue()
        for (index, token) in ["c", "a", "b"].enumerated() {
            queue.enqueue(note(.noData, to: SubscriberKey(token: token), at: Double(10 - index)))
        }
        XCTAssertEqual(queue.due(now: 20, limit: 2).map(\.subscriber.token), ["b", "a"])
        XCTAssertEqual(queue.due(now: 20).map(\.subscriber.token), ["c"])
    }

    func testValueAndNoDataCoalesceToTheLatestWhileBackingOff() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.value(.number("1")), at: 0, origin: "e1"))
        XCTAssertEqual(queue.due(now: 0).count, 1)
        XCTAssertEqual(fail(queue, key(), at: 0), .scheduled(at: 1))
        XCTAssertEqual(queue.due(now: 1).count, 1)
        XCTAssertEqual(fail(queue, key(), at: 1), .scheduled(at: 3))
        XCTAssertEqual(queue.enqueue(note(.value(.number("2")), at: 2, origin: "e2")), .coalesced)
        XCTAssertEqual(queue.enqueue(note(.value(.number("3")), at: 2.5, origin: "e3")), .coalesced)
        XCTAssertEqual(queue.count, 1)
        let pending = queue.pending(for: key())
        XCTAssertEqual(pending.map(\.content), [.value(.number("3"))])
        XCTAssertEqual(pending.first?.origin, "e3")
        XCTAssertEqual(pending.first?.firstFailureAt, 0)
        XCTAssertEqual(pending.first?.attempt, 2)
        XCTAssertEqual(pending.first?.notBefore, 3)
        XCTAssertEqual(queue.nextWakeUp, 3)
        XCTAssertTrue(queue.due(now: 2.9).isEmpty)
        XCTAssertEqual(queue.due(now: 3).map(\.content), [.value(.number("3"))])

        // noData likewise; but a different mode is queued behind, not merged.
        let other = DeliveryQueue()
        other.enqueue(note(.noData))
        XCTAssertEqual(other.due(now: 0).count, 1)
        XCTAssertEqual(fail(other, key(), at: 0), .scheduled(at: 1))
        XCTAssertEqual(other.enqueue(note(.noData)), .coalesced)
        XCTAssertEqual(other.enqueue(note(.value(nil))), .queued)
        XCTAssertEqual(other.enqueue(note(.noData)), .queued)
        XCTAssertEqual(other.count, 3)
    }

    /// Outside a backoff nothing is merged: every notification is delivered, in order.
    func testNothingIsCoalescedWhileTheSubscriptionIsNotBackingOff() {
        let queue = DeliveryQueue()
        for value in 1...3 { XCTAssertEqual(queue.enqueue(note(.value(.number("\(value)")))), .queued) }
        XCTAssertEqual(queue.enqueue(note(.noData)), .queued)
        XCTAssertEqual(queue.enqueue(note(.noData)), .queued)
        var sent: [NotificationContent] = []
        while let head = queue.due(now: 0).first {
            sent.append(head.content)
            queue.completed(head.key)
        }
        XCTAssertEqual(sent, [.value(.number("1")), .value(.number("2")), .value(.number("3")), .noData, .noData])
    }

    func testNothingMergesIntoTheInFlightHeadButTheBacklogMergesAfterItFails() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.value(.number("1"))))
        XCTAssertEqual(queue.due(now: 0).count, 1)
        XCTAssertEqual(queue.enqueue(note(.value(.number("2")), at: 0.2)), .queued)
        XCTAssertEqual(queue.enqueue(note(.value(.number("3")), at: 0.4)), .queued)
        XCTAssertEqual(queue.count, 3)
        // The head fails: the backlog replaces it under the head's schedule.
        XCTAssertEqual(fail(queue, key(), at: 0.5), .scheduled(at: 1.5))
        let pending = queue.pending(for: key())
        XCTAssertEqual(pending.map(\.content), [.value(.number("3"))])
        // The failure streak started at 0.5 (the backlog's enqueue times are provisional).
        XCTAssertEqual(pending.first?.firstFailureAt, 0.5)
        XCTAssertEqual(pending.first?.attempt, 1)
        XCTAssertEqual(queue.count, 1)
    }

    func testChildEventsMergeWhileBackingOff() {
        let queue = DeliveryQueue()
        let one = JSONValue.number("1")
        let two = JSONValue.number("2")
        queue.enqueue(note(.childEvent(ChildChanges(added: ["a": one], removed: ["r"]), keysOnly: false)))
        XCTAssertEqual(queue.due(now: 0).count, 1)
        XCTAssertEqual(fail(queue, key(), at: 0), .scheduled(at: 1))
        XCTAssertEqual(queue.enqueue(note(.childEvent(ChildChanges(changed: ["a": two, "c": one]), keysOnly: false))), .coalesced)
        XCTAssertEqual(queue.enqueue(note(.childEvent(ChildChanges(added: ["r": two], removed: ["c"]), keysOnly: false))), .coalesced)
        XCTAssertEqual(
            queue.pending(for: key()).map(\.content),
            [.childEvent(ChildChanges(added: ["a": two], removed: ["c"], changed: ["r": two]), keysOnly: false)])
        // keysOnly is sticky.
        XCTAssertEqual(queue.enqueue(note(.childEvent(ChildChanges(changed: ["z": .bool(true)]), keysOnly: true))), .coalesced)
        guard case .childEvent(_, let keysOnly)? = queue.pending(for: key()).first?.content else { return XCTFail() }
        XCTAssertTrue(keysOnly)
        XCTAssertEqual(queue.pending(for: key()).first?.attempt, 1)
        XCTAssertEqual(queue.count, 1)
    }

    func testChildEventsThatCancelOutLeaveNothing() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.childEvent(ChildChanges(added: ["a": .bool(true)]), keysOnly: false)))
        XCTAssertEqual(queue.due(now: 0).count, 1)
        XCTAssertEqual(fail(queue, key(), at: 0), .scheduled(at: 1))
        var cancelling = note(.childEvent(ChildChanges(removed: ["a"]), keysOnly: false))
        cancelling.holds = [7]
        XCTAssertEqual(queue.enqueue(cancelling), .cancelled)
        XCTAssertEqual(queue.count, 0)
        XCTAssertEqual(queue.takeReleasedHolds(), [7])
        XCTAssertFalse(queue.hasPending(for: key()))
        XCTAssertNil(queue.nextWakeUp)
        XCTAssertTrue(queue.due(now: 100).isEmpty)

        // Behind a failed head: the failed one and its follower cancel; nothing is retried.
        queue.enqueue(note(.childEvent(ChildChanges(added: ["a": .bool(true)]), keysOnly: false)))
        XCTAssertEqual(queue.due(now: 0).count, 1)
        queue.enqueue(note(.childEvent(ChildChanges(removed: ["a"]), keysOnly: false)))
        XCTAssertEqual(fail(queue, key(), at: 1), .superseded)
        XCTAssertEqual(queue.count, 0)
        XCTAssertNil(queue.nextWakeUp)
    }

    /// A revoke is the last message of its subscription: what was queued before it goes first.
    func testRevokeComesAfterWhatWasQueuedBeforeIt() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.value(.number("1"))))
        XCTAssertEqual(queue.due(now: 0).count, 1)
        XCTAssertEqual(fail(queue, key(), at: 0), .scheduled(at: 1))
        queue.enqueue(note(.noData))
        XCTAssertEqual(queue.enqueue(note(.revoke(.expired), at: 0.5)), .queued)
        // Revokes are never coalesced, and nothing coalesces into one.
        XCTAssertEqual(queue.enqueue(note(.revoke(.disabled), at: 0.6)), .queued)
        XCTAssertEqual(queue.enqueue(note(.noData, at: 0.7)), .queued)
        XCTAssertEqual(queue.count, 5)
        var sent: [NotificationContent] = []
        var now = 1.0
        while queue.count > 0 {
            guard let head = queue.due(now: now).first else {
                now += 1
                continue
            }
            sent.append(head.content)
            queue.completed(head.key)
        }
        XCTAssertEqual(sent, [.value(.number("1")), .noData, .revoke(.expired), .revoke(.disabled), .noData])
    }

    /// Retries before a revoke are delivered or, at their deadline, discarded together with it.
    func testRetriesBeforeARevokeAreDeliveredOrDiscardedNeverAfterIt() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.value(.number("1"))))
        XCTAssertEqual(queue.due(now: 0).count, 1)
        queue.enqueue(note(.value(.number("2"))))
        queue.enqueue(note(.revoke(.permissionDenied)))
        XCTAssertEqual(fail(queue, key(), at: 0), .scheduled(at: 1))
        // The failed head merged with the value behind it; the revoke stays last.
        XCTAssertEqual(queue.pending(for: key()).map(\.content), [.value(.number("2")), .revoke(.permissionDenied)])
        XCTAssertEqual(queue.due(now: 1).map(\.content), [.value(.number("2"))])
        guard case .discarded(let entries) = fail(queue, key(), at: 8000) else { return XCTFail("not discarded") }
        XCTAssertEqual(entries.map(\.content), [.value(.number("2")), .revoke(.permissionDenied)])
        XCTAssertEqual(queue.count, 0)
    }

    func testProjectPauseHoldsBackItsScopeOnly() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.noData, to: Self.alice, scope: "fcm:p1"))
        queue.enqueue(note(.noData, to: Self.bob, scope: "fcm:p1"))
        let carol = SubscriberKey(token: "carol")
        queue.enqueue(note(.noData, to: carol, scope: "fcm:p2"))
        // Alice hits the project quota.
        XCTAssertEqual(queue.due(now: 0).count, 3)
        XCTAssertEqual(fail(queue, key(Self.alice), at: 0, quota: true), .scheduled(at: 60))
        queue.pause(scope: "fcm:p1", until: 60)
        queue.completed(key(Self.bob))
        queue.completed(key(carol))
        queue.enqueue(note(.value(nil), to: Self.bob, scope: "fcm:p1", at: 1))
        queue.enqueue(note(.value(nil), to: carol, scope: "fcm:p2", at: 1))
        XCTAssertEqual(queue.nextWakeUp, 1)
        XCTAssertEqual(queue.due(now: 1).map(\.subscriber.token), ["carol"])
        XCTAssertEqual(queue.nextWakeUp, 60)
        XCTAssertTrue(queue.due(now: 59.9).isEmpty)
        XCTAssertEqual(Set(queue.due(now: 60).map(\.subscriber.token)), ["alice", "bob"])
        // A shorter pause does not shorten a longer one.
        queue.pause(scope: "fcm:p2", until: 500)
        queue.pause(scope: "fcm:p2", until: 100)
        XCTAssertEqual(queue.pausedUntil(scope: "fcm:p2"), 500)
        // A failure scheduled inside a pause reports the pause end.
        queue.enqueue(note(.noData, to: SubscriberKey(token: "dave"), scope: "fcm:p2", at: 61))
        XCTAssertEqual(queue.nextWakeUp, 500)
        XCTAssertEqual(fail(queue, key(carol), at: 61), .scheduled(at: 500))
    }

    func testRemoveAllForSubscription() {
        let queue = DeliveryQueue()
        queue.enqueue(note(.value(.number("1"))))
        queue.enqueue(note(.noData, to: Self.bob))
        XCTAssertEqual(queue.removeAll(forSubscription: key(Self.bob)).count, 1)
        XCTAssertEqual(queue.due(now: 0).map(\.subscriber.token), ["alice"])
        queue.enqueue(note(.value(.number("2"))))
        // In flight: kept until resolved, never retried.
        XCTAssertEqual(queue.removeAll(forSubscription: key()).count, 1)
        XCTAssertEqual(queue.count, 1)
        XCTAssertEqual(fail(queue, key(), at: 1), .superseded)
        XCTAssertEqual(queue.count, 0)
        XCTAssertNil(queue.nextWakeUp)
        XCTAssertEqual(queue.removeAll(forSubscription: key()).count, 0)
        // removeAll(where:) by app.
        queue.enqueue(note(.noData))
        queue.enqueue(note(.noData, to: Self.bob))
        XCTAssertEqual(queue.removeAll { $0.app == "app" }.count, 2)
        XCTAssertTrue(queue.isEmpty)
    }

    func testManySubscriptionsAreAllDeliveredInOrder() {
        // A seeded random workload: per subscription, deliveries come out in enqueue order and the latest
        // notification is always delivered (coalescing never loses it); counts balance at the end.
        let queue = DeliveryQueue()
        var rng = RetryTestRandom(seed: 99)
        var latest: [RetryKey: Int] = [:]
        var delivered: [RetryKey: [Int]] = [:]
        var now = 0.0
        func deliver(_ pending: PendingNotification) {
            delivered[pending.key, default: []].append(Int(pending.origin) ?? -1)
            queue.completed(pending.key)
        }
        for serial in 0..<3000 {
            let subscriber = SubscriberKey(token: "t\(Int.random(in: 0..<50, using: &rng))")
            let content: NotificationContent = Bool.random(using: &rng) ? .noData : .value(nil)
            let item = note(content, to: subscriber, scope: "s\(subscriber.token.count)", at: now, origin: "\(serial)")
            queue.enqueue(item)
            latest[item.key] = serial
            if Int.random(in: 0..<4, using: &rng) == 0 {
                if Int.random(in: 0..<20, using: &rng) == 0 { queue.pause(scope: "s2", until: now + 30) }
                for pending in queue.due(now: now) {
                    if Int.random(in: 0..<3, using: &rng) == 0 {
                        guard case .scheduled = fail(queue, pending.key, at: now) else { return XCTFail("not scheduled") }
                    } else {
                        deliver(pending)
                    }
                }
            }
            now += 0.5
        }
        while let wake = queue.nextWakeUp {
            now = max(now, wake)
            for pending in queue.due(now: now) { deliver(pending) }
        }
        XCTAssertEqual(queue.count, 0)
        XCTAssertEqual(queue.inFlightCount, 0)
        XCTAssertEqual(Set(delivered.keys), Set(latest.keys))
        for (key, serials) in delivered {
            XCTAssertEqual(serials, serials.sorted())
            XCTAssertEqual(Set(serials).count, serials.count)
            XCTAssertEqual(serials.last, latest[key])
        }
    }
}
