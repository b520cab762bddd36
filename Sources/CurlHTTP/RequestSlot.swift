import Synchronization

/// The meeting point of one `send` call and the transfer thread: holds the request and the caller's
/// continuation, and guarantees the continuation is resumed exactly once, whoever finishes first
/// (completion, cancellation, shutdown, rejection).
final class RequestSlot: Sendable {
    private enum State {
        /// Created; the caller has not suspended yet.
        case idle
        /// The caller is suspended on this continuation.
        case waiting(CheckedContinuation<HTTPResponse, any Error>)
        /// Finished before the caller suspended (e.g. cancelled early); delivered when it does.
        case finishedEarly(Result<HTTPResponse, any Error>)
        /// The result was delivered.
        case done
    }

    let id: UInt64
    let request: HTTPRequest
    private let state = Mutex<State>(.idle)

    init(id: UInt64, request: HTTPRequest) {
        self.id = id
        self.request = request
    }

    /// Whether a result was already produced (the transfer thread skips such slots).
    var isFinished: Bool {
        state.withLock { state in
            switch state {
            case .idle, .waiting: false
            case .finishedEarly, .done: true
            }
        }
    }

    /// Stores the caller's continuation. Returns false, after resuming it, when the slot had already been
    /// finished (then the request must not be submitted).
    func install(_ continuation: CheckedContinuation<HTTPResponse, any Error>) -> Bool {
        let early: Result<HTTPResponse, any Error>? = state.withLock { state in
            switch state {
            case .idle:
                state = .waiting(continuation)
                return nil
            case .finishedEarly(let result):
                state = .done
                return result
            case .waiting, .done:
                preconditionFailure("RequestSlot.install called twice")
            }
        }
        guard let early else { return true }
        continuation.resume(with: early)
        return false
    }

    /// Delivers `result` unless a result was already delivered; later calls are ignored.
    func finish(_ result: Result<HTTPResponse, any Error>) {
        let continuation: CheckedContinuation<HTTPResponse, any Error>? = state.withLock { state in
            switch state {
            case .idle:
                state = .finishedEarly(result)
                return nil
            case .waiting(let continuation):
                state = .done
                return continuation
            case .finishedEarly, .done:
                return nil
            }
        }
        continuation?.resume(with: result)
    }
}
