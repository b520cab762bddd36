import GatewayTesting
import KafkaClient
import Synchronization
import XCTest

@testable import Gateway

/// The one write-until-stored chain of records written outside a partition (dead letters, load markers): retried with backoff
/// while the log refuses, ended when its purpose is gone or the sink closes.
final class ProduceUntilStoredTests: XCTestCase {
    let record = KafkaRecord(topic: "dlq", partition: 0, key: Array("k".utf8), value: Array("v".utf8))

    func testARefusedRecordIsWrittenOnceTheLogTakesIt() async throws {
        let log = InMemoryLog(topics: ["dlq": 1])
        log.setFailing(true)
        let failures = Atomic<Int>(0)
        let stored = Atomic<Bool>(false)
        log.produceUntilStored(
            record, delay: 0.02, while: { true }, failed: { _, _ in failures.add(1, ordering: .relaxed) },
            done: { offset in stored.store(offset == 0, ordering: .relaxed) })
        await waitUntil("two failures") { failures.load(ordering: .relaxed) >= 2 }
        log.setFailing(false)
        await waitUntil("the record stored") { stored.load(ordering: .relaxed) }
        XCTAssertEqual(log.records("dlq", partition: 0).count, 1)
    }

    func testTheChainEndsWhenItsPurposeIsGone() async throws {
        let log = InMemoryLog(topics: ["dlq": 1])
        log.setFailing(true)
        let keepTrying = Atomic<Bool>(true)
        let failures = Atomic<Int>(0)
        let ended = Atomic<Bool>(false)
        log.produceUntilStored(
            record, delay: 0.02, while: { keepTrying.load(ordering: .relaxed) },
            failed: { _, _ in failures.add(1, ordering: .relaxed) }, done: { offset in ended.store(offset == nil, ordering: .relaxed) })
        await waitUntil("a failure") { failures.load(ordering: .relaxed) >= 1 }
        keepTrying.store(false, ordering: .relaxed)
        let seen = failures.load(ordering: .relaxed)
        try await Task.sleep(for: .milliseconds(200))  // several retry delays: nothing more may be tried
        XCTAssertLessThanOrEqual(failures.load(ordering: .relaxed), seen + 1, "an attempt under way may still fail once")
        XCTAssertTrue(ended.load(ordering: .relaxed), "the end is reported")
    }

    /// The chain's wait is on the log's timer service: its shutdown ends the chain at once (`done(nil)`), and
    /// nothing of the writer is held past it, however long the wait.
    func testTheTimersShutdownEndsAPendingRetryAtOnceAndReleasesItsOwner() async throws {
        final class Owner: Sendable {}
        let log = InMemoryLog(topics: ["dlq": 1])
        log.setFailing(true)
        let failures = Atomic<Int>(0)
        let ended = Atomic<Int>(0)
        weak var owner: Owner?
        do {
            let held = Owner()
            owner = held
            log.produceUntilStored(
                record, delay: 3600, while: { true }, failed: { _, _ in failures.add(1, ordering: .relaxed) },
                done: { offset in withExtendedLifetime(held) { if offset == nil { ended.add(1, ordering: .relaxed) } } })
        }
        await waitUntil("the first failure") { failures.load(ordering: .relaxed) == 1 }
        XCTAssertEqual(log.timers.pendingCount, 1, "an hour's wait")
        XCTAssertNotNil(owner)
        await log.timers.shutdown()
        XCTAssertEqual(ended.load(ordering: .relaxed), 1, "ended by the shutdown, not by its delay")
        XCTAssertEqual(failures.load(ordering: .relaxed), 1, "not tried again")
        await waitUntil("the chain released") { owner == nil }
        // A chain started after the shutdown ends at its first failure.
        log.produceUntilStored(record, while: { true }, failed: { _, _ in }, done: { offset in if offset == nil { ended.add(1, ordering: .relaxed) } })
        await waitUntil("the late chain ended") { ended.load(ordering: .relaxed) == 2 }
    }
}
