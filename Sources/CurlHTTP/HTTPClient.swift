import Logging
import Synchronization

/// An HTTP/2 client over libcurl's multi interface that multiplexes many concurrent requests over a few
/// connections per host (``HTTPClientConfiguration/maxConnectionsPerHost``, default 2).
///
/// One dedicated thread (never the Swift concurrency pool) owns the libcurl multi handle: it blocks in
/// `curl_multi_poll`, and ``send(_:)`` hands requests to it through a lock-protected FIFO queue, waking it
/// with `curl_multi_wakeup`.
///
/// Back-pressure: at most ``HTTPClientConfiguration/maxConcurrentRequests`` requests are inside libcurl;
/// further `send` calls stay suspended in the queue. The queue holds at most
/// ``HTTPClientConfiguration/maxQueuedRequests`` requests; beyond that, `send` fails fast with
/// ``HTTPClientError/Code/overloaded`` (retriable) instead of buffering without bound.
///
/// Protocols: `https://` negotiates HTTP/2 with ALPN (HTTP/1.1 only if the server lacks h2); `http://` speaks
/// h2c with prior knowledge. With libcurl < 8.0 (Debian 12 ships 7.88.1), which cannot reuse a prior-knowledge
/// connection, cleartext origins go through ``CleartextHTTP2Gate``: one h2c connection per origin carrying at
/// most ``HTTPClientConfiguration/maxConcurrentStreamsPerConnection`` requests at a time.
///
/// Proxies: ``HTTPClientConfiguration/proxy``, by default the process environment's (`https_proxy`, `no_proxy`,
/// ...) read once when the client is created (``ProxySettings``).
///
/// Per request the thread does as little as it can: easy handles are pooled with their options, and a request
/// like a handle's last one sets only its URL, body, header list (shared by requests with equal headers) and
/// callback context.
///
/// Call ``shutdown()`` when done: it fails every pending request with ``HTTPClientError/Code/shutdown`` and
/// joins the thread. Dropping the last reference without it does the same, blocking briefly.
public final class HTTPClient: Sendable {
    let shared: ClientShared
    private let thread: TransferThread
    private let nextID = Atomic<UInt64>(1)
    /// Whether the thread was joined (so it is joined exactly once).
    private let joined = Mutex(false)

    /// Creates the client and starts its thread.
    public init(configuration: HTTPClientConfiguration = HTTPClientConfiguration(), logger: Logger) throws {
        let shared = try ClientShared(configuration: configuration)
        let loop = TransferLoop(shared: shared, logger: logger)
        self.shared = shared
        thread = try TransferThread { loop.run() }
    }

    deinit {
        if shared.state.withLock({ $0.shutdown() }) {
            shared.multi.wakeup()
        }
        joinOnce()
    }

    /// Sends `request` and returns the response, whatever its status.
    ///
    /// Throws ``HTTPClientError`` when no response was received (see ``HTTPClientError/isTimeout``), and
    /// `CancellationError` when the calling task is cancelled (the transfer is then aborted).
    public func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let slot = RequestSlot(id: nextID.wrappingAdd(1, ordering: .relaxed).oldValue, request: request)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard slot.install(continuation) else { return }
                submit(slot)
            }
        } onCancel: {
            slot.finish(.failure(CancellationError()))
            switch shared.state.withLock({ $0.cancel(id: slot.id) }) {
            case .askThread(wakeThread: true): shared.multi.wakeup()
            case .askThread(wakeThread: false), .removedFromQueue, .none: break
            }
        }
    }

    private func submit(_ slot: RequestSlot) {
        let limit = shared.configuration.maxQueuedRequests
        switch shared.state.withLock({ $0.enqueue(slot, limit: limit) }) {
        case .enqueued(let wakeThread):
            if wakeThread { shared.multi.wakeup() }
        case .rejected(let code):
            let message = code == .overloaded
                ? "more than \(limit) requests are waiting" : "the HTTP client was shut down"
            slot.finish(.failure(HTTPClientError(code: code, message: message)))
        }
    }

    /// Fails all pending and in-flight requests with ``HTTPClientError/Code/shutdown``, stops accepting new
    /// ones and waits for the transfer thread to exit. Idempotent.
    public func shutdown() async {
        if shared.state.withLock({ $0.shutdown() }) {
            shared.multi.wakeup()
        }
        // The loop exits within one iteration (its poll is woken); joining blocks only that long.
        joinOnce()
    }

    /// Joins the thread the first time; later (or concurrent) callers wait until it has been joined.
    private func joinOnce() {
        joined.withLock { joined in
            if !joined {
                thread.join()
                joined = true
            }
        }
    }
}
