import Synchronization

/// Gathers the acknowledgements of a batch of records and resumes one waiter when all are in.
final class WriteCollector: Sendable {
    private struct State {
        var positions: [(partition: Int32, offset: Int64)?]
        var remaining: Int
        var error: KafkaError?
        var continuation: CheckedContinuation<Result<[(partition: Int32, offset: Int64)], KafkaError>, Never>?
    }

    private let state: Mutex<State>

    init(count: Int) { state = Mutex(State(positions: Array(repeating: nil, count: count), remaining: count)) }

    func install(_ continuation: CheckedContinuation<Result<[(partition: Int32, offset: Int64)], KafkaError>, Never>) {
        state.withLock { $0.continuation = continuation }
    }

    func record(_ index: Int, _ result: Result<(partition: Int32, offset: Int64), KafkaError>) {
        let finished = state.withLock { state -> (CheckedContinuation<Result<[(partition: Int32, offset: Int64)], KafkaError>, Never>, Result<[(partition: Int32, offset: Int64)], KafkaError>)? in
            switch result {
            case .success(let position): state.positions[index] = position
            case .failure(let error): state.error = state.error ?? error
            }
            state.remaining -= 1
            guard state.remaining == 0, let continuation = state.continuation else { return nil }
            state.continuation = nil
            if let error = state.error { return (continuation, .failure(error)) }
            return (continuation, .success(state.positions.compactMap { $0 }))
        }
        if let (continuation, outcome) = finished { continuation.resume(returning: outcome) }
    }
}
