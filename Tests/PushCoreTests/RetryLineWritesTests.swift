import XCTest

@testable import PushCore

/// ``RetryLineWrites``: a pending-retry line whose write failed is written again after a backoff (0.5 s doubling to
/// 30 s, jittered), one chain per line, instead of at the next turn of the delivery loop. (Times passed in.)
final class RetryLineWritesTests: XCTestCase {
    let alice = RetryKey(app: "app", path: DataPath(validatedSegments: [ExactString("a")]), subscriber: SubscriberKey(token: "alice"))
    let bob = RetryKey(app: "app", path: DataPath(validatedSegments: [ExactString("a")]), subscriber: SubscriberKey(token: "bob"))

    func testAChangedLineIsTakenOnce() {
        var writes = RetryLineWrites()
        writes.markChanged(alice)
        writes.markChanged(alice)
        XCTAssertEqual(writes.takeReady(now: 0), [alice])
        XCTAssertEqual(writes.takeReady(now: 0), [])
        XCTAssertNil(writes.nextWakeUp)
    }

    func testAFailedWriteWaitsItsBackoffDoublingTo30SecondsJittered() {
        var writes = RetryLineWrites()
        var random = RetryTestRandom(seed: 18)
        var now = 100.0
        var delays: [Double] = []
        for failures in 1...10 {
            writes.markChanged(alice)
            XCTAssertEqual(writes.takeReady(now: now), [alice])
            let at = writes.failed(alice, now: now, random: &random)
            let nominal = RetryLineWrites.delay(afterFailures: failures)
            XCTAssertGreaterThanOrEqual(at - now, nominal / 2, "failure \(failures)")
            XCTAssertLessThanOrEqual(at - now, nominal, "failure \(failures)")
            XCTAssertEqual(writes.nextWakeUp, at)
            // Not before its time, whatever changes the line meanwhile (rewrite(line:), a new retry).
            writes.markChanged(alice)
            XCTAssertEqual(writes.takeReady(now: at - 0.001), [], "failure \(failures): written before its backoff")
            XCTAssertEqual(writes.takeReady(now: at), [alice], "failure \(failures)")
            XCTAssertEqual(writes.takeReady(now: at), [], "one write per backoff")
            delays.append(nominal)
            now = at
        }
        XCTAssertEqual(delays, [0.5, 1, 2, 4, 8, 16, 30, 30, 30, 30])
        // Stored: the chain ends; the next failure starts again at 0.5 s.
        writes.stored(alice)
        XCTAssertEqual(writes.takeReady(now: now), [])
        XCTAssertLessThanOrEqual(writes.failed(alice, now: now, random: &random) - now, 0.5)
    }

    func testOneChainPerLineAndOtherLinesAreNotHeldUp() {
        var writes = RetryLineWrites()
        var random = RetryTestRandom(seed: 1)
        writes.markChanged(alice)
        writes.markChanged(bob)
        XCTAssertEqual(Set(writes.takeReady(now: 0)), [alice, bob])
        let at = writes.failed(alice, now: 0, random: &random)
        // Two writes of alice were in flight: the second's failure joins the chain, it does not start another.
        XCTAssertEqual(writes.failed(alice, now: 0.1, random: &random), at)
        // A write of alice sent before the failure succeeds: the failed one still waits (its holds need it).
        writes.stored(alice)
        writes.markChanged(bob)
        XCTAssertEqual(writes.takeReady(now: 0.1), [bob], "bob is not held up by alice's backoff")
        XCTAssertEqual(writes.takeReady(now: at), [alice])
        // Taken for writing: a change meanwhile is written at the next turn (not lost behind the chain).
        writes.markChanged(alice)
        XCTAssertEqual(writes.takeReady(now: at), [alice])
    }

    func testForgottenLinesAreNotWritten() {
        var writes = RetryLineWrites()
        var random = RetryTestRandom(seed: 2)
        writes.markChanged(alice)
        _ = writes.takeReady(now: 0)
        let at = writes.failed(alice, now: 0, random: &random)
        writes.markChanged(bob)
        writes.removeAll { $0 == alice || $0 == bob }
        XCTAssertEqual(writes.takeReady(now: at), [])
    }
}
