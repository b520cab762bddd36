import XCTest

@testable import PushCore

/// ``DeliveryQueue/Admission``: a provider project's requests in flight (concurrency) and its send rate together.
/// A line its project refuses waits in its order without a sending place, the lines of other projects go on, a
/// head is admitted by all its admissions or none, and every outcome of a head frees its place. (The clock is
/// passed in: no timing.)
extension DeliveryQueueTests {
    /// Project by the token's prefix before `-` (`p-1` → `p`): at most `limit` in flight, and, with `rate`, that
    /// many per second with `burst`; tokens without `-` need nothing.
    func projectQueue(limit: Int, rate: Double? = nil, burst: Int = 1) -> DeliveryQueue {
        DeliveryQueue(admissions: { entry in
            let token = entry.subscriber.token
            guard let dash = token.firstIndex(of: "-") else { return [] }
            let project = String(token[..<dash])
            let inFlight = DeliveryQueue.Admission.concurrency(DeliveryQueue.Gate(key: project, limit: limit))
            guard let rate else { return [inFlight] }
            return [.rate(DeliveryQueue.Pace(key: project, rate: rate, burst: burst)), inFlight]
        })
    }

    func tokens(_ notifications: [PendingNotification]) -> [String] { notifications.map(\.subscriber.token) }

    func testAProjectAtItsInFlightLimitHoldsNoSendingPlaceWhileOtherProjectsGoOn() {
        let queue = projectQueue(limit: 2)
        for index in 0..<5 { queue.enqueue(note(.noData, to: SubscriberKey(token: "p-\(index)"), at: Double(index))) }
        for index in 0..<2 { queue.enqueue(note(.noData, to: SubscriberKey(token: "q-\(index)"), at: Double(5 + index))) }
        queue.enqueue(note(.noData, to: SubscriberKey(token: "r-0"), at: 7))
        // Four sending places: p takes its two, q the other two; p's waiting lines took none.
        XCTAssertEqual(tokens(queue.due(now: 10, limit: 4)), ["p-0", "p-1", "q-0", "q-1"])
        XCTAssertEqual(queue.inFlight(gate: "p"), 2)
        XCTAssertEqual(queue.parkedCount(gate: "p"), 3)
        XCTAssertEqual(queue.inFlightCount, 4, "only sends hold sending places")
        XCTAssertEqual(tokens(queue.due(now: 10)), ["r-0"], "another project's line is not held up")
        XCTAssertNil(queue.nextWakeUp, "waiting lines do not wake the sender up")
        // A later line of p queues behind p's waiting ones.
        queue.enqueue(note(.noData, to: SubscriberKey(token: "p-late"), at: 9))
        XCTAssertTrue(queue.due(now: 10).isEmpty)
        var order: [String] = []
        for resolved in ["p-0", "p-1", "p-2", "p-3", "p-4"] {
            queue.completed(key(SubscriberKey(token: resolved)))
            order += tokens(queue.due(now: 10))
            XCTAssertLessThanOrEqual(queue.inFlight(gate: "p"), 2)
        }
        XCTAssertEqual(order, ["p-2", "p-3", "p-4", "p-late"], "p's lines go out in their order as places free")
        for token in ["p-late", "q-0", "q-1", "r-0"] { queue.completed(key(SubscriberKey(token: token))) }
        XCTAssertEqual(queue.count, 0)
        XCTAssertEqual(queue.inFlight(gate: "p"), 0)
        XCTAssertEqual(queue.parkedCount(gate: "p"), 0, "an idle project is forgotten")
    }

    func testWhenTheBindingAdmissionChangesOneLineMovesNotTheWholeBacklog() {
        // A project's pace and its in-flight limit bind in turn. A line refused by the other admission waits there,
        // and the lines behind it stay where they are: before, each change of the binding one moved every waiting
        // line from one admission to the other (O(n log n) under the lane's lock: 125-145 ms at 50,000 waiting).
        let queue = projectQueue(limit: 1, rate: 1, burst: 1)
        let names = (0..<100).map { "p-\($0)" }
        for name in names { queue.enqueue(note(.noData, to: SubscriberKey(token: name))) }
        var order = tokens(queue.due(now: 0))
        XCTAssertEqual(order, ["p-0"])
        XCTAssertEqual(queue.waitingCount(pace: "p"), 99, "the others wait for a token")
        // A token comes while the place is taken: one line waits for the place, 98 stay behind it.
        XCTAssertTrue(queue.due(now: 1).isEmpty)
        XCTAssertEqual(queue.waitingCount(pace: "p") + queue.parkedCount(gate: "p"), 99)
        XCTAssertEqual(queue.parkedCount(gate: "p"), 1)
        XCTAssertNil(queue.nextWakeUp, "waiting for the place, not woken up by the token")
        // Places free faster than tokens come (the pace binds), then slower (the limit binds), in turns: every line
        // goes out once, in its order.
        var now = 1.0
        var inFlight = ["p-0"]
        var step = 0
        while order.count < names.count, step < 10_000 {
            step += 1
            let limitBinds = step % 40 >= 20
            now += limitBinds ? 1 : 0.25
            if !limitBinds || step % 4 == 0 {
                for name in inFlight { queue.completed(key(SubscriberKey(token: name))) }
                inFlight = []
            }
            let (pacedBefore, limitedBefore) = (queue.waitingCount(pace: "p"), queue.parkedCount(gate: "p"))
            let due = tokens(queue.due(now: now))
            inFlight += due
            order += due
            XCTAssertLessThanOrEqual(queue.parkedCount(gate: "p") - limitedBefore, 1, "one line moves to the limit at a time")
            XCTAssertLessThanOrEqual(queue.waitingCount(pace: "p") - pacedBefore, 1, "one line moves to the pace at a time")
            XCTAssertLessThanOrEqual(queue.inFlight(gate: "p"), 1)
        }
        XCTAssertEqual(order, names)
    }

    func testARateAndAnInFlightLimitAreGrantedAllOrNone() {
        let queue = projectQueue(limit: 1, rate: 1, burst: 1)
        for name in ["a", "b", "c"] { queue.enqueue(note(.noData, to: SubscriberKey(token: "p-\(name)"))) }
        XCTAssertEqual(tokens(queue.due(now: 0)), ["p-a"], "a token and a place")
        XCTAssertEqual(queue.waitingCount(pace: "p"), 2, "b and c wait for a token")
        // The next token comes at 1, but a's place is still taken: b waits for the place, c behind it (set aside
        // where it was), and neither takes the token.
        XCTAssertEqual(queue.nextWakeUp, 1)
        XCTAssertTrue(queue.due(now: 1).isEmpty)
        XCTAssertEqual(queue.waitingCount(pace: "p"), 1)
        XCTAssertEqual(queue.parkedCount(gate: "p"), 1)
        XCTAssertNil(queue.nextWakeUp, "nothing to do before a place frees")
        // The place frees at 1.5: the token that came at 1 is still there (none was taken without the place).
        queue.completed(key(SubscriberKey(token: "p-a")))
        XCTAssertEqual(tokens(queue.due(now: 1.5)), ["p-b"])
        // The place frees at 1.6, the next token comes at 2.5: c waits for the token and holds no place meanwhile.
        queue.completed(key(SubscriberKey(token: "p-b")))
        XCTAssertTrue(queue.due(now: 1.6).isEmpty)
        XCTAssertEqual(queue.inFlight(gate: "p"), 0, "no place taken without the token")
        XCTAssertEqual(queue.waitingCount(pace: "p"), 1)
        XCTAssertEqual(queue.nextWakeUp ?? 0, 2.5, accuracy: 1e-9)
        XCTAssertEqual(tokens(queue.due(now: 2.5)), ["p-c"])
        XCTAssertEqual(queue.inFlight(gate: "p"), 1)
        XCTAssertEqual(queue.takePacedSends(), ["p": 2], "b and c waited for their project's rate")
    }

    func testEveryOutcomeOfAHeadFreesItsPlace() {
        let queue = projectQueue(limit: 1)
        for (index, name) in ["a", "b", "c", "d"].enumerated() {
            queue.enqueue(note(.noData, to: SubscriberKey(token: "p-\(name)"), at: Double(index)))
        }
        XCTAssertEqual(tokens(queue.due(now: 10)), ["p-a"])
        // A failure (retried later) frees the place.
        XCTAssertEqual(fail(queue, key(SubscriberKey(token: "p-a")), at: 10), .scheduled(at: 11))
        XCTAssertEqual(tokens(queue.due(now: 10)), ["p-b"])
        // A success frees it; the retry (due at 11) queues behind c, which waited since 2.
        queue.completed(key(SubscriberKey(token: "p-b")))
        XCTAssertEqual(tokens(queue.due(now: 11)), ["p-c"])
        // A waiting line removed (a dead token) gives its turn to the next.
        XCTAssertEqual(queue.removeAll(forSubscription: key(SubscriberKey(token: "p-d"))).count, 1)
        queue.completed(key(SubscriberKey(token: "p-c")))
        XCTAssertEqual(tokens(queue.due(now: 11)), ["p-a"])
        // A line removed while in flight keeps its place until its send ends; its failure (not retried) frees it.
        XCTAssertTrue(queue.removeAll(forSubscription: key(SubscriberKey(token: "p-a"))).isEmpty)
        queue.enqueue(note(.noData, to: SubscriberKey(token: "p-e"), at: 12))
        XCTAssertTrue(queue.due(now: 12).isEmpty)
        XCTAssertEqual(fail(queue, key(SubscriberKey(token: "p-a")), at: 12), .superseded)
        XCTAssertEqual(tokens(queue.due(now: 12)), ["p-e"])
        queue.completed(key(SubscriberKey(token: "p-e")))
        XCTAssertEqual(queue.count, 0)
        XCTAssertEqual(queue.inFlightCount, 0)
        XCTAssertEqual(queue.inFlight(gate: "p"), 0)
    }

    func testARateAndLimitWorkloadNeverExceedsTheLimitAndDeliversEverythingInOrder() {
        // Seeded: 40 subscriptions over 4 projects of 3 places and 20 sends a second, failures and coalescing, 8
        // sending places; a project never has more than 3 in flight, every subscription's deliveries come in
        // order and end with its latest notification.
        let queue = projectQueue(limit: 3, rate: 20, burst: 2)
        runSeededWorkload(queue, seed: 11, prefix: "p", step: 0.02) {
            for project in 0..<4 { XCTAssertLessThanOrEqual(queue.inFlight(gate: "p\(project)"), 3) }
            XCTAssertLessThanOrEqual(queue.inFlightCount, 8)
        }
    }
}
