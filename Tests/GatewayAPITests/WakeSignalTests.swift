import XCTest

@testable import Gateway

/// The delivery loop's wake-up: no signal is lost, a wait ends at its timeout or its task's cancellation, and a
/// timer set for an earlier wait ends no later one.
final class WakeSignalTests: XCTestCase {
    func testASignalBeforeTheWaitIsRemembered() async {
        let wake = WakeSignal()
        wake.signal()
        let start = ContinuousClock.now
        await wake.wait(timeout: .seconds(30))
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(10))
    }

    func testASignalWakesTheWaiter() async {
        let wake = WakeSignal()
        let waiting = Task { await wake.wait(timeout: .seconds(30)) }
        await waitUntil("the wait") { wake.isWaiting }
        let start = ContinuousClock.now
        wake.signal()
        await waiting.value
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(10))
    }

    func testAWaitEndsAtItsTimeout() async {
        let wake = WakeSignal()
        let start = ContinuousClock.now
        await wake.wait(timeout: .milliseconds(50))
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(40))
    }

    func testAnEarlierWaitsTimerDoesNotEndALaterWait() async {
        let wake = WakeSignal()
        // The first wait (its timer at 100 ms) is ended by a signal, well before its timer.
        let first = Task { await wake.wait(timeout: .milliseconds(100)) }
        await waitUntil("the first wait") { wake.isWaiting }
        wake.signal()
        await first.value
        let start = ContinuousClock.now
        await wake.wait(timeout: .milliseconds(400))
        XCTAssertGreaterThanOrEqual(ContinuousClock.now - start, .milliseconds(350), "ended by the first wait's timer")
    }

    func testCancellationEndsAWait() async {
        let wake = WakeSignal()
        let waiting = Task { await wake.wait(timeout: nil) }
        waiting.cancel()
        await waiting.value
    }
}
