import Synchronization

/// Wakes one waiting task: ``signal()`` before ``wait(timeout:)`` is remembered, so no wake-up is lost.
final class WakeSignal: Sendable {
    private struct State {
        var signalled = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

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
            await waitOrTimeOut(timeout)
        } onCancel: {
            signal()
        }
    }

    private func waitOrTimeOut(_ timeout: Duration?) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let now = self.state.withLock { state -> Bool in
                        if state.signalled {
                            state.signalled = false
                            return true
                        }
                        state.waiter = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            }
            if let timeout {
                group.addTask {
                    do {
                        try await Task.sleep(for: timeout)
                    } catch {
                        return  // cancelled: the wait ended first (a signal, or the caller's cancellation)
                    }
                    self.signal()
                }
            }
            await group.next()
            group.cancelAll()
        }
    }
}
