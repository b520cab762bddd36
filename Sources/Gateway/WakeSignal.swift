import Dispatch
import Synchronization

/// Wakes one waiting task: ``signal()`` before ``wait(timeout:)`` is remembered, so no wake-up is lost.
///
/// A wait is one continuation, resumed by whichever comes first: a signal, the signal's one timer (re-armed by each
/// wait, so waits never leave timers behind), or the task's cancellation. A wake-up is then one hop to the waiting
/// task (a task group racing a sleeping child cost four).
final class WakeSignal: Sendable {
    private struct State {
        var signalled = false
        var waiter: CheckedContinuation<Void, Never>?
        /// Numbers the waits, so that a timer armed for an earlier wait ends nothing.
        var wait: UInt64 = 0
        var timerWait: UInt64 = 0
    }

    private let state = Mutex(State())
    private nonisolated(unsafe) let timer: any DispatchSourceTimer

    init() {
        timer = DispatchSource.makeTimerSource(queue: .global())
        timer.setEventHandler { [weak self] in self?.timerFired() }
        timer.schedule(deadline: .distantFuture)
        timer.activate()
    }

    deinit { timer.cancel() }

    /// A task waits now (for tests).
    var isWaiting: Bool { state.withLock { $0.waiter != nil } }

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.signalled = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    private func timerFired() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.timerWait == state.wait, let waiter = state.waiter else { return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// The loop of a service that sends what is due (the delivery service, the event hook): each turn, `turn` hands
    /// out what is due at `clock()` (under its owner's lock), whether to stop, and the next due time; each item is
    /// sent by a child task (`send`); `afterTurn` runs; then, when nothing was due, the loop sleeps until the next due
    /// time (at most 60 s) or a signal. Returns once it stopped and the sends started have finished.
    func runDueLoop<Item: Sendable>(
        clock: () -> Double, turn: (_ now: Double) -> (due: [Item], stopping: Bool, next: Double?), afterTurn: () -> Void = {},
        send: @escaping @Sendable (Item) async -> Void
    ) async {
        await withDiscardingTaskGroup { group in
            while true {
                let now = clock()
                let (due, stopping, next) = turn(now)
                for item in due { group.addTask { await send(item) } }
                afterTurn()
                if stopping || Task.isCancelled { break }
                if due.isEmpty {
                    let timeout = next.map { Duration.milliseconds(Int64(max(1, min(($0 - now) * 1000, 60_000)))) }
                    await wait(timeout: timeout ?? .seconds(60))
                }
            }
        }
    }

    /// Returns at the next signal (at once if one came since the last wait), after `timeout`, or when the task
    /// is cancelled.
    func wait(timeout: Duration?) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waits = state.withLock { state -> Bool in
                    if state.signalled {
                        state.signalled = false
                        return false
                    }
                    state.wait &+= 1
                    state.waiter = continuation
                    state.timerWait = timeout == nil ? 0 : state.wait
                    // Re-armed under the lock: a timer firing now sees this wait's number only once it is armed.
                    timer.schedule(deadline: timeout.map { .now() + $0.seconds } ?? .distantFuture)
                    return true
                }
                if !waits { continuation.resume() }
            }
        } onCancel: {
            signal()
        }
    }
}
