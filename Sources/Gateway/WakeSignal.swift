import Dispatch
import Synchronization

/// Wakes one waiting task: ``signal()`` before ``wait(timeout:)`` is remembered, so no wake-up is lost.
///
/// A wait is one continuation, resumed by whichever comes first: a signal, its timer (a dispatch timer that
/// resumes it only if it is still the same wait), or the task's cancellation. A wake-up is then one hop to the
/// waiting task (a task group racing a sleeping child cost four: the group's child, the task, the cancelled
/// sleep, and the task again).
final class WakeSignal: Sendable {
    private struct State {
        var signalled = false
        var waiter: CheckedContinuation<Void, Never>?
        /// Numbers the waits, so that a timer set for an earlier wait ends nothing.
        var wait: UInt64 = 0
    }

    private let state = Mutex(State())

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

    /// Returns at the next signal (at once if one came since the last wait), after `timeout`, or when the task
    /// is cancelled.
    func wait(timeout: Duration?) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let wait = state.withLock { state -> UInt64? in
                    if state.signalled {
                        state.signalled = false
                        return nil
                    }
                    state.wait &+= 1
                    state.waiter = continuation
                    return state.wait
                }
                guard let wait else { return continuation.resume() }
                guard let timeout else { return }
                DispatchQueue.global().asyncAfter(deadline: .now() + timeout.seconds) { [self] in
                    let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                        guard state.wait == wait, let waiter = state.waiter else { return nil }
                        state.waiter = nil
                        return waiter
                    }
                    waiter?.resume()
                }
            }
        } onCancel: {
            signal()
        }
    }
}
