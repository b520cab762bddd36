import GatewayTesting
import KafkaClient
import Logging
import PushCore
import Synchronization
import XCTest

@testable import Gateway

/// The gateway's one timer service (``Timers``): a work runs once, due or stopped; the shutdown resolves every
/// pending work at once and keeps none. No timing is asserted: long delays stand for "not before the shutdown",
/// and waits are bounded.
final class TimersTests: XCTestCase {
    /// What the works of a test were run with, by name.
    final class Firings: Sendable {
        private let list = Mutex<[(String, Timers.Firing)]>([])
        func record(_ name: String, _ firing: Timers.Firing) { list.withLock { $0.append((name, firing)) } }
        var all: [String: [Timers.Firing]] { list.withLock { Dictionary(grouping: $0, by: \.0).mapValues { $0.map(\.1) } } }
        var count: Int { list.withLock { $0.count } }
    }

    /// Stands for whoever schedules (a partition, the writer): only the pending work holds it.
    final class Owner: Sendable {}

    func testAWorkRunsOnceWhenDue() async {
        let timers = Timers()
        let firings = Firings()
        timers.schedule(after: 0.01) { firings.record("short", $0) }
        await waitUntil("the work ran") { firings.count == 1 }
        XCTAssertEqual(firings.all["short"], [.due])
        XCTAssertEqual(timers.pendingCount, 0)
        await timers.shutdown()
        XCTAssertEqual(firings.all["short"], [.due], "once")
    }

    func testAnEarlierDeadlineScheduledLaterRunsFirst() async {
        let timers = Timers()
        let firings = Firings()
        timers.schedule(after: 3600) { firings.record("long", $0) }
        timers.schedule(after: 0.01) { firings.record("short", $0) }
        await waitUntil("the short work ran") { firings.all["short"] != nil }
        XCTAssertNil(firings.all["long"], "the long one still waits")
        XCTAssertEqual(timers.pendingCount, 1)
        await timers.shutdown()
        XCTAssertEqual(firings.all["long"], [.stopped])
    }

    func testTheShutdownRunsEveryPendingWorkStoppedAndKeepsNone() async {
        let timers = Timers()
        let firings = Firings()
        weak var owner: Owner?
        do {
            let held = Owner()
            owner = held
            timers.schedule(after: 3600) { firing in
                withExtendedLifetime(held) { firings.record("hour", firing) }
            }
        }
        timers.schedule(after: 30) { firings.record("backoff", $0) }
        timers.schedule(after: 1e12) { firings.record("forever", $0) }
        XCTAssertEqual(timers.pendingCount, 3)
        XCTAssertNotNil(owner, "the pending work holds its owner")
        XCTAssertTrue(timers.isRunning)

        await timers.shutdown()
        // Returned once every stopped path ran: nothing waits for its delay.
        XCTAssertEqual(firings.all["hour"], [.stopped])
        XCTAssertEqual(firings.all["backoff"], [.stopped])
        XCTAssertEqual(firings.all["forever"], [.stopped])
        XCTAssertEqual(timers.pendingCount, 0)
        XCTAssertFalse(timers.isRunning)
        await waitUntil("the owner released") { owner == nil }

        await timers.shutdown()
        XCTAssertEqual(firings.count, 3, "a second shutdown runs nothing again")
    }

    func testAWorkScheduledAfterTheShutdownRunsStoppedAtOnce() async {
        let timers = Timers()
        await timers.shutdown()
        let firings = Firings()
        let handle = timers.schedule(after: 3600) { firings.record("late", $0) }
        await waitUntil("the late work ran") { firings.count == 1 }
        XCTAssertEqual(firings.all["late"], [.stopped])
        XCTAssertFalse(handle.cancel(), "it ran already")
        XCTAssertEqual(timers.pendingCount, 0)
    }

    func testACancelledWorkNeverRunsAndIsReleasedAtOnce() async {
        let timers = Timers()
        let firings = Firings()
        weak var owner: Owner?
        let handle: Timers.Handle
        do {
            let held = Owner()
            owner = held
            handle = timers.schedule(after: 3600) { firing in
                withExtendedLifetime(held) { firings.record("cancelled", firing) }
            }
        }
        timers.schedule(after: 0.02) { firings.record("kept", $0) }
        XCTAssertTrue(handle.cancel())
        XCTAssertNil(owner, "released by the cancel")
        XCTAssertFalse(handle.cancel(), "once")
        await waitUntil("the other work ran") { firings.all["kept"] != nil }
        await timers.shutdown()
        XCTAssertNil(firings.all["cancelled"], "neither due nor stopped")
        XCTAssertEqual(firings.all["kept"], [.due])
    }

    func testAWorkMayScheduleAgainFromItsRun() async {
        let timers = Timers()
        let firings = Firings()
        timers.schedule(after: 0) { first in
            firings.record("first", first)
            timers.schedule(after: 3600) { firings.record("second", $0) }
        }
        await waitUntil("the first ran and the second is pending") { firings.all["first"] != nil && timers.pendingCount == 1 }
        await timers.shutdown()
        XCTAssertEqual(firings.all["first"], [.due])
        XCTAssertEqual(firings.all["second"], [.stopped])
    }

    /// A partition's timer (here a repair an hour away) holds its driver until it fires: once the gateway's timers
    /// stop, it is resolved (a repair is not written on the stopped path) and the partition is released, without
    /// waiting the hour.
    func testAPendingPartitionTimerNoLongerHoldsThePartitionAfterTheShutdown() async throws {
        let log = InMemoryLog(topics: ["state": 1])
        weak var partition: PartitionState?
        do {
            let state = PartitionState(partition: 0, topic: "state", role: .owner, sink: log, logger: Logger(label: "test"))
            partition = state
            state.scheduleRepair(RetryKey(app: "chat", path: try DataPath("/x"), subscriber: SubscriberKey(kind: .mobile, token: "t")), delay: 3600)
        }
        XCTAssertEqual(log.timers.pendingCount, 1)
        XCTAssertNotNil(partition, "held by its pending repair")
        await log.timers.shutdown()
        await waitUntil("the partition released") { partition == nil }
        XCTAssertTrue(log.records("state", partition: 0).isEmpty, "the repair was not written on its stopped path")
    }
}
