import CCurl
import CCurlShims
import GatewayLogging
import Logging
import Synchronization

/// What the client and its transfer thread share.
final class ClientShared: Sendable {
    let configuration: HTTPClientConfiguration
    let multi: CurlMultiHandle
    let state = Mutex(SubmissionState())
    /// The configuration's proxies, or the process environment's read once, now.
    let proxy: ProxySettings

    init(configuration: HTTPClientConfiguration) throws {
        self.configuration = configuration
        proxy = configuration.proxy ?? .fromProcessEnvironment()
        multi = try CurlMultiHandle(configuration: configuration)
    }
}

/// The loop run by the client's dedicated thread: moves queued requests into libcurl, drives the multi
/// handle (`curl_multi_perform` / `curl_multi_poll`), completes finished transfers and honours
/// cancellations and shutdown. Everything here except `shared` is confined to that thread.
final class TransferLoop {
    /// Idle easy handles kept for reuse: as many as the client runs at once
    /// (``HTTPClientConfiguration/maxConcurrentRequests``), so a steady load whose transfers in flight go up and down
    /// never destroys and re-creates handles (each `curl_easy_cleanup` + `curl_easy_init` frees and allocates its
    /// buffers: 1.4 % of the gateway's CPU, and a tenth of its allocator's samples, with 64 kept at 200 in flight).
    /// At most 256 (each idle handle keeps libcurl's receive buffer, 16 KB).
    private let maxIdleHandles: Int
    /// Longest block in `curl_multi_poll`; producers wake the thread earlier with `curl_multi_wakeup`.
    private static let maxPollMilliseconds: Int32 = 1000
    /// `CURLE_OPERATION_TIMEDOUT`.
    private static let curlTimedOut = 28

    private let shared: ClientShared
    private let logger: Logger
    private var transfers: [UnsafeMutableRawPointer: Transfer] = [:]
    private var handlesByID: [UInt64: UnsafeMutableRawPointer] = [:]
    private var idleHandles: [CurlEasyHandle] = []
    private var headerLists = HeaderListCache()
    /// Only with a libcurl that cannot reuse h2c prior-knowledge connections.
    private var gate: CleartextHTTP2Gate?

    init(shared: ClientShared, logger: Logger) {
        self.shared = shared
        self.logger = logger
        maxIdleHandles = min(256, max(16, shared.configuration.maxConcurrentRequests))
        if CleartextHTTP2Gate.isNeeded {
            gate = CleartextHTTP2Gate(maxActivePerOrigin: shared.configuration.maxConcurrentStreamsPerConnection)
        }
    }

    func run() {
        let maxActive = shared.configuration.maxConcurrentRequests
        while true {
            let capacity = maxActive - transfers.count - (gate?.heldCount ?? 0)
            switch shared.state.withLock({ $0.takeWork(capacity: capacity) }) {
            case .shutdown(let neverStarted):
                failEverything(neverStarted)
                return
            case .run(let start, let cancel):
                for slot in start { self.start(slot) }
                for id in cancel { self.cancel(id) }
            }

            var running: Int32 = 0
            // What this call writes leaves at the uncork, in as few segments as it fills (``CurlMultiHandle/corkSockets(_:)``).
            // A pass with no transfer (a wake-up for a cancel, an idle timeout) writes requests to nobody: no
            // cork, and no two `setsockopt` calls per connection.
            let cork = !transfers.isEmpty
            if cork { shared.multi.corkSockets(true) }
            let performed = curl_multi_perform(shared.multi.raw, &running)
            if cork { shared.multi.corkSockets(false) }
            if performed != CURLM_OK {
                logger.error("curl_multi_perform failed", metadata: [LoggingKeys.curlCode: "\(performed.rawValue)"])
            }
            let finished = completeFinishedTransfers()

            let hasCapacity = transfers.count + (gate?.heldCount ?? 0) < maxActive
            let mayBlock = finished == 0 && shared.state.withLock { $0.prepareToBlock(hasCapacity: hasCapacity) }
            _ = curl_multi_poll(shared.multi.raw, nil, 0, mayBlock ? Self.maxPollMilliseconds : 0, nil)
        }
    }

    private func start(_ slot: RequestSlot) {
        if slot.isFinished { return }  // cancelled meanwhile
        guard gate != nil, !slot.request.http1, let origin = CleartextHTTP2Gate.origin(of: slot.request.url) else {
            launch(slot, cleartextMode: nil, gateOrigin: nil)
            return
        }
        if let mode = gate?.admit(slot, origin: origin) {
            launch(slot, cleartextMode: mode, gateOrigin: origin)
        }
    }

    /// Configures an easy handle for `slot` and adds it to the multi handle.
    private func launch(_ slot: RequestSlot, cleartextMode: CleartextHTTP2Gate.Mode?, gateOrigin: String?) {
        let easy: CurlEasyHandle
        do {
            easy = try idleHandles.popLast() ?? CurlEasyHandle()
        } catch {
            finish(slot, .failure(error), gateOrigin: gateOrigin, usedHTTP2: false, connectionSuspect: false)
            return
        }
        let transfer = Transfer(
            slot: slot, easy: easy, maxBodySize: shared.configuration.maxResponseBodySize, gateOrigin: gateOrigin)
        do {
            try transfer.configure(
                shared.configuration, proxy: shared.proxy, headerLists: &headerLists, cleartextMode: cleartextMode,
                sockets: shared.multi.sockets)
        } catch {
            easy.reset()  // whatever was set before the failure is unknown
            recycle(easy)
            finish(slot, .failure(error), gateOrigin: gateOrigin, usedHTTP2: false, connectionSuspect: false)
            return
        }
        let added = curl_multi_add_handle(shared.multi.raw, easy.raw)
        guard added == CURLM_OK else {
            recycle(easy)
            let error = HTTPClientError(
                code: .transport, message: "curl_multi_add_handle failed: \(String(cString: curl_multi_strerror(added)))")
            finish(slot, .failure(error), gateOrigin: gateOrigin, usedHTTP2: false, connectionSuspect: false)
            return
        }
        transfers[easy.raw] = transfer
        handlesByID[slot.id] = easy.raw
    }

    /// Delivers a result and lets the gate release requests waiting for the origin.
    private func finish(
        _ slot: RequestSlot, _ result: Result<HTTPResponse, any Error>, gateOrigin: String?,
        usedHTTP2: Bool, connectionSuspect: Bool
    ) {
        slot.finish(result)
        guard let gateOrigin, var gate else { return }
        let released = gate.finished(
            id: slot.id, origin: gateOrigin, usedHTTP2: usedHTTP2, connectionSuspect: connectionSuspect)
        self.gate = gate
        for (next, mode) in released {
            launch(next, cleartextMode: mode, gateOrigin: gateOrigin)
        }
    }

    private func cancel(_ id: UInt64) {
        guard let handle = handlesByID[id], let transfer = remove(handle) else { return }
        // The slot was already finished with CancellationError by the cancelling task.
        finish(
            transfer.slot, .failure(CancellationError()), gateOrigin: transfer.gateOrigin, usedHTTP2: false,
            connectionSuspect: false)
    }

    /// Reads libcurl's completion messages and finishes those transfers. Returns how many finished.
    private func completeFinishedTransfers() -> Int {
        var finished = 0
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(shared.multi.raw, &remaining) {
            var handle: UnsafeMutableRawPointer?
            var code = CURLE_OK
            guard CCurlShims_msg_done(message, &handle, &code) == 1, let handle,
                  let transfer = transfers[handle]
            else { continue }
            // Read everything from the handle before it carries another request.
            let result: Result<HTTPResponse, any Error>
            var usedHTTP2 = false
            var connectionSuspect = false
            if code == CURLE_OK {
                let response = transfer.makeResponse()
                usedHTTP2 = response.version == .http2
                connectionSuspect = !usedHTTP2
                result = .success(response)
            } else if code == CURLE_WRITE_ERROR && transfer.bodyTooLarge {
                result = .failure(HTTPClientError(
                    code: .responseTooLarge,
                    message: "response body larger than \(shared.configuration.maxResponseBodySize) bytes"))
            } else {
                // Any transport failure but a timeout (a slow answer on a sound connection) may mean the
                // established h2c connection is gone: a refused stream, a GOAWAY or a dropped connection make
                // libcurl retry on a new one, which `CURL_HTTP_VERSION_2_0` opens with an HTTP/1.1 `Upgrade`.
                connectionSuspect = Int(code.rawValue) != Self.curlTimedOut
                result = .failure(HTTPClientError(
                    code: .transport, curlCode: Int(code.rawValue), message: transfer.easy.errorMessage(for: code),
                    requestBytesSent: transfer.easy.info(CURLINFO_REQUEST_SIZE),
                    wasNotRead: transfer.slot.request.sendOnce && transfer.easy.wasResetUnread(code)))
            }
            _ = remove(handle)
            finish(
                transfer.slot, result, gateOrigin: transfer.gateOrigin, usedHTTP2: usedHTTP2,
                connectionSuspect: connectionSuspect)
            finished += 1
        }
        return finished
    }

    /// Takes a transfer out of libcurl and the tables, recycling its easy handle.
    private func remove(_ handle: UnsafeMutableRawPointer) -> Transfer? {
        guard let transfer = transfers.removeValue(forKey: handle) else { return nil }
        handlesByID[transfer.slot.id] = nil
        _ = curl_multi_remove_handle(shared.multi.raw, handle)
        recycle(transfer.easy)
        return transfer
    }

    /// Keeps an idle handle for reuse with its options (``CurlEasyHandle/settings``): the next request like it
    /// sets only what differs.
    private func recycle(_ easy: CurlEasyHandle) {
        guard idleHandles.count < maxIdleHandles else { return }
        idleHandles.append(easy)
    }

    private func failEverything(_ neverStarted: [RequestSlot]) {
        let error = HTTPClientError(code: .shutdown, message: "the HTTP client was shut down")
        for slot in neverStarted { slot.finish(.failure(error)) }
        for slot in gate?.takeAllHeld() ?? [] { slot.finish(.failure(error)) }
        gate = nil
        for handle in Array(transfers.keys) {
            remove(handle)?.slot.finish(.failure(error))
        }
        idleHandles.removeAll()
    }
}
