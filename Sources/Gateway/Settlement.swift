import Synchronization

/// Waits for `count` writes to settle; true when all of them were stored. Either awaited (``wait()``) or
/// reported to a callback given at creation.
final class Settlement: Sendable {
    private struct State {
        var remaining: Int
        var allStored = true
        /// A write failed in a way that may still have stored it (a timeout after it was sent).
        var maybeStored = false
        var waiter: CheckedContinuation<Bool, Never>?
    }

    private let state: Mutex<State>
    private let completion: (@Sendable (Bool) -> Void)?

    init(count: Int, completion: (@Sendable (Bool) -> Void)? = nil) {
        state = Mutex(State(remaining: count))
        self.completion = completion
    }

    func settle(_ stored: Bool) {
        let (waiter, done, allStored) = state.withLock { state -> (CheckedContinuation<Bool, Never>?, Bool, Bool) in
            state.remaining -= 1
            if !stored { state.allStored = false }
            guard state.remaining == 0 else { return (nil, false, false) }
            defer { state.waiter = nil }
            return (state.waiter, true, state.allStored)
        }
        guard done else { return }
        waiter?.resume(returning: allStored)
        completion?(allStored)
    }

    /// A write failed but may have been stored all the same (its outcome is unknown).
    func markMaybeStored() { state.withLock { $0.maybeStored = true } }

    /// After ``wait()``: whether a failed write may have been stored.
    var maybeStored: Bool { state.withLock { $0.maybeStored } }

    func wait() async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let done = state.withLock { state -> Bool? in
                if state.remaining <= 0 { return state.allStored }
                state.waiter = continuation
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }
}
