import Dispatch
import Foundation
import KafkaClient
import Synchronization
import XCTest

@testable import Gateway

/// Issue 19: each change partition has its share of the in-flight budget; a partition whose records in flight fill
/// it is paused alone (and fetched again at the low-water mark), the replica's budget staying the last resort.
final class OffsetLedgerTests: XCTestCase {
    /// What the ledger and the pauses told the consumer, in order.
    private final class ConsumerCalls: Sendable {
        private let calls = Mutex<[String]>([])
        private let stored = Mutex<[TopicPartition: Int64]>([:])

        func pause(_ partitions: [Int32]) { calls.withLock { $0.append("pause \(partitions)") } }
        func resume(_ partitions: [Int32]) { calls.withLock { $0.append("resume \(partitions)") } }
        func store(_ offsets: [TopicPartition: Int64]) { stored.withLock { $0.merge(offsets) { $1 } } }

        var log: [String] { calls.withLock { $0 } }
        var positions: [TopicPartition: Int64] { stored.withLock { $0 } }
    }

    private struct Fixture {
        let calls = ConsumerCalls()
        let metrics = GatewayMetrics()
        let pauses: FetchPauses
        let ledger: OffsetLedger

        init(maxInFlight: Int = 100, share: Int = 4, companion: String? = "notes") {
            let calls = self.calls
            pauses = FetchPauses(pause: { calls.pause($0) }, resume: { calls.resume($0) })
            ledger = OffsetLedger(
                storeOffsets: { calls.store($0) }, topic: "changes", companion: companion, maxInFlight: maxInFlight,
                share: InFlightShare(limit: share), pauses: pauses, metrics: metrics)
            ledger.assigned([0, 1])
        }

        /// Takes in and starts records `offsets` of `partition` (as the consumer's thread does).
        func start(_ partition: Int32, _ offsets: ClosedRange<Int64>, companion: Bool = false) {
            for offset in offsets {
                ledger.waitForCapacity()
                ledger.start(partition: partition, offset: offset, companion: companion)
            }
        }

        var pausedForBudget: Double? {
            metrics.text().split(separator: "\n").first { $0.hasPrefix("pushgateway_partitions_paused_for_budget ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") }
        }
    }

    func testAPartitionIsPausedAloneAtItsShareAndResumedAtTheLowWaterMark() {
        let fixture = Fixture(share: 4)
        fixture.start(0, 0...2)
        fixture.start(1, 0...2)
        XCTAssertEqual(fixture.calls.log, [], "under the share: nothing paused")
        fixture.start(0, 3...3)
        XCTAssertEqual(fixture.calls.log, ["pause [0]"], "the fourth record fills partition 0's share: it alone is paused")
        XCTAssertTrue(fixture.ledger.isOverBudget(0))
        XCTAssertFalse(fixture.ledger.isOverBudget(1))
        XCTAssertEqual(fixture.pausedForBudget, 1)
        // Records fetched before the pause took effect are still taken in: no second pause.
        fixture.start(0, 4...4)
        XCTAssertEqual(fixture.calls.log, ["pause [0]"])

        fixture.ledger.finish(partition: 0, offset: 0)
        fixture.ledger.finish(partition: 0, offset: 1)
        XCTAssertEqual(fixture.calls.log, ["pause [0]"], "3 in flight: above the low-water mark (2)")
        fixture.ledger.finish(partition: 0, offset: 3)
        XCTAssertEqual(fixture.calls.log, ["pause [0]", "resume [0]"], "down to the low-water mark: fetched again")
        XCTAssertFalse(fixture.ledger.isOverBudget(0))
        XCTAssertEqual(fixture.pausedForBudget, 0)
        XCTAssertEqual(fixture.calls.positions[TopicPartition(topic: "changes", partition: 0)], 2, "the commit position follows the finished prefix")
        XCTAssertEqual(fixture.ledger.inFlight(0), 2)
        XCTAssertEqual(fixture.ledger.inFlight(1), 3)
    }

    func testUserNotificationsCountAgainstTheirChangePartitionsShare() {
        let fixture = Fixture(share: 4)
        fixture.start(0, 0...1)
        fixture.start(0, 10...11, companion: true)
        XCTAssertEqual(fixture.calls.log, ["pause [0]"])
        fixture.ledger.finish(partition: 0, offset: 10, topic: "notes")
        fixture.ledger.finish(partition: 0, offset: 11, topic: "notes")
        XCTAssertEqual(fixture.calls.log, ["pause [0]", "resume [0]"])
        XCTAssertEqual(fixture.calls.positions[TopicPartition(topic: "notes", partition: 0)], 12)
    }

    /// The replica's budget stays the last resort: with every partition under its share, the consumer's thread
    /// still waits once `maxInFlight` records are unfinished, until one finishes.
    func testTheReplicasBudgetIsTheLastResort() {
        let fixture = Fixture(maxInFlight: 4, share: 4)
        fixture.start(0, 0...1)
        fixture.start(1, 0...1)
        XCTAssertEqual(fixture.calls.log, [], "no partition reached its share")
        let admitted = DispatchSemaphore(value: 0)
        let ledger = fixture.ledger
        Thread.detachNewThread {
            ledger.waitForCapacity()
            ledger.start(partition: 1, offset: 2)
            admitted.signal()
        }
        XCTAssertEqual(admitted.wait(timeout: .now() + 0.3), .timedOut, "the fifth record waits for the replica's budget")
        fixture.ledger.finish(partition: 0, offset: 0)
        XCTAssertEqual(admitted.wait(timeout: .now() + 10), .success, "taken in once a record finished")
        XCTAssertEqual(fixture.ledger.totalInFlight, 4)
    }

    func testARevokedPartitionForgetsItsBudgetPause() {
        let fixture = Fixture(share: 4)
        fixture.start(0, 0...3)
        XCTAssertEqual(fixture.calls.log, ["pause [0]"])
        // Revoked (as ChangeConsumer does: the pauses forgotten first, then the ledger): no resume of a partition
        // that is leaving, no budget pause left behind.
        fixture.pauses.forget([0])
        fixture.ledger.revoked([0], abandoned: 4)
        XCTAssertEqual(fixture.calls.log, ["pause [0]"])
        XCTAssertFalse(fixture.ledger.isOverBudget(0))
        XCTAssertEqual(fixture.pausedForBudget, 0)
        XCTAssertEqual(fixture.ledger.inFlight(0), 0)
        // A late finish of an abandoned record moves nothing.
        fixture.ledger.waitForCapacity()
        fixture.ledger.finish(partition: 0, offset: 1)
        XCTAssertNil(fixture.calls.positions[TopicPartition(topic: "changes", partition: 0)])
        // Assigned again: counted from zero, paused again only at the share.
        fixture.ledger.assigned([0])
        fixture.start(0, 0...2)
        XCTAssertEqual(fixture.calls.log, ["pause [0]"])
        fixture.start(0, 3...3)
        XCTAssertEqual(fixture.calls.log, ["pause [0]", "pause [0]"])
    }

    /// Fenced (given up as superseded): the partition is held for loading, then its work abandoned: the budget's
    /// release must not fetch it again.
    func testAbandoningTheBudgetDoesNotResumeAPartitionHeldForLoading() {
        let fixture = Fixture(share: 4)
        fixture.start(0, 0...3)
        fixture.pauses.hold([0], for: .loading)
        fixture.ledger.revoked([0], abandoned: 4)
        XCTAssertEqual(fixture.calls.log, ["pause [0]"])
        XCTAssertEqual(fixture.pauses.reasons(0), [.loading])
        fixture.pauses.release([0], for: .loading)
        XCTAssertEqual(fixture.calls.log, ["pause [0]", "resume [0]"])
    }

    func testALoadAndTheBudgetDoNotResumeEachOther() {
        // Loaded while over its budget: fetched only once it drains.
        let fixture = Fixture(share: 2)
        fixture.pauses.hold([0], for: .loading)
        fixture.start(0, 0...1)
        XCTAssertEqual(fixture.pauses.reasons(0), [.loading, .budget])
        fixture.pauses.release([0], for: .loading)
        XCTAssertEqual(fixture.calls.log, ["pause [0]"], "still over its budget")
        fixture.ledger.finish(partition: 0, offset: 0)
        XCTAssertEqual(fixture.calls.log, ["pause [0]", "resume [0]"])

        // Drained while loading: fetched only once loaded.
        let other = Fixture(share: 2)
        other.start(1, 0...1)
        other.pauses.hold([1], for: .loading)
        other.ledger.finish(partition: 1, offset: 0)
        other.ledger.finish(partition: 1, offset: 1)
        XCTAssertFalse(other.ledger.isOverBudget(1))
        XCTAssertEqual(other.calls.log, ["pause [1]"], "drained, but still loading")
        other.pauses.release([1], for: .loading)
        XCTAssertEqual(other.calls.log, ["pause [1]", "resume [1]"])
        // Releasing a reason that does not hold it changes nothing.
        other.pauses.release([1], for: .budget)
        XCTAssertEqual(other.calls.log, ["pause [1]", "resume [1]"])
    }

    /// A partition just assigned is held for its load without telling the consumer (a pause could race the start of
    /// its fetcher); the first record that arrives while it loads applies the pause. The release always resumes it: a
    /// partition revoked while paused stays paused in librdkafka through a later assignment.
    func testADeferredHoldPausesAtTheFirstRecordAndTheReleaseAlwaysResumes() {
        let fixture = Fixture(share: 4)
        fixture.pauses.hold([0, 1], for: .loading, deferred: true)
        XCTAssertEqual(fixture.calls.log, [], "not told yet")
        XCTAssertEqual(fixture.pauses.reasons(0), [.loading])
        fixture.pauses.applyDeferred(0)
        fixture.pauses.applyDeferred(0)
        XCTAssertEqual(fixture.calls.log, ["pause [0]"], "told once")
        fixture.pauses.release([0, 1], for: .loading)
        XCTAssertEqual(fixture.calls.log, ["pause [0]", "resume [0]", "resume [1]"])
        // Nothing holds it: nothing to apply.
        fixture.pauses.applyDeferred(1)
        XCTAssertEqual(fixture.calls.log.count, 3)

        // Another reason coming while the deferred hold was not applied pauses it at once.
        let other = Fixture(share: 2)
        other.pauses.hold([1], for: .loading, deferred: true)
        other.start(1, 0...1)
        XCTAssertEqual(other.calls.log, ["pause [1]"])
        XCTAssertEqual(other.pauses.reasons(1), [.loading, .budget])
        other.pauses.applyDeferred(1)
        XCTAssertEqual(other.calls.log, ["pause [1]"], "already applied")
    }

    func testTheDerivedShareAndItsSetting() throws {
        XCTAssertEqual(InFlightShare.derived(maxInFlight: 5000), InFlightShare(limit: 1250))
        XCTAssertEqual(InFlightShare.derived(maxInFlight: 40), InFlightShare(limit: 16), "the floor")
        XCTAssertEqual(InFlightShare.derived(maxInFlight: 10), InFlightShare(limit: 10), "never more than the budget")
        XCTAssertEqual(InFlightShare(limit: 1).resumeAt, 0)
        XCTAssertEqual(InFlightShare(limit: 9).resumeAt, 4)

        func load(_ yaml: String) throws -> GatewayConfiguration {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString).yaml").path
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(yaml.utf8)))
            defer { try? FileManager.default.removeItem(atPath: path) }
            return try GatewayConfiguration.load(file: path, environment: [:])
        }
        XCTAssertEqual(try load("kafka: {maxInFlightRecords: 100}").kafka.inFlightShare, InFlightShare(limit: 25))
        XCTAssertEqual(try load("kafka: {maxInFlightRecords: 100, maxInFlightRecordsPerPartition: 60}").kafka.inFlightShare, InFlightShare(limit: 60))
        XCTAssertThrowsError(try load("kafka: {maxInFlightRecords: 100, maxInFlightRecordsPerPartition: 101}"))
        XCTAssertThrowsError(try load("kafka: {maxInFlightRecordsPerPartition: -1}"))
    }
}
