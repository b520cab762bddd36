import Synchronization

/// An async semaphore: at most `limit` holders at once, the others wait in FIFO order.
final class ConcurrencyLimit: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    init(_ limit: Int) { state = Mutex(State(available: max(1, limit))) }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}

/// Bounds the requests in flight to one provider project (one app's FCM project or HMS app): a slow or failing
/// project cannot take every HTTP/2 stream of the shared connections, and the excess waits here (in memory
/// bounded by `kafka.maxInFlightRecords`) rather than in libcurl.
struct LimitedSender: PushSender {
    let inner: any PushSender
    let limit: ConcurrencyLimit

    init(_ inner: any PushSender, maxInFlight: Int) {
        self.inner = inner
        self.limit = ConcurrencyLimit(maxInFlight)
    }

    var provider: String { inner.provider }
    var project: String { inner.project }

    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        await limit.acquire()
        defer { limit.release() }
        return await inner.send(token: token, payload: payload)
    }
}
