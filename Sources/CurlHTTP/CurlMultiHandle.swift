import CCurl
import CCurlShims

/// Owns a libcurl multi handle (`CURLM *`), configured for HTTP/2 multiplexing.
///
/// Everything except ``wakeup()`` must be called from the client's transfer thread; `curl_multi_wakeup` is
/// the one multi call libcurl allows from any thread, which is what makes the `@unchecked Sendable` sound.
final class CurlMultiHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer
    /// The TCP sockets of this handle's connections (every easy handle added to it tracks its sockets here,
    /// ``CurlEasyHandle/trackSockets(in:)``), corked by the transfer thread while `curl_multi_perform` writes
    /// (``corkSockets(_:)``). Freed after `curl_multi_cleanup`, which closes the last connections through it.
    let sockets: UnsafeMutablePointer<CCurlShims_sockets>

    init(configuration: HTTPClientConfiguration) throws {
        try CurlGlobal.ensureInitialized()
        guard let handle = curl_multi_init() else {
            throw HTTPClientError(code: .transport, message: "curl_multi_init failed")
        }
        raw = handle
        sockets = .allocate(capacity: 1)
        sockets.initialize(to: CCurlShims_sockets())
        let options: [(CURLMoption, Int)] = [
            (CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX)),
            (CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost),
            (CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.maxConcurrentStreamsPerConnection),
            // Connection cache: a few per host is plenty, we talk to one or two provider hosts.
            (CURLMOPT_MAXCONNECTS, Swift.max(8, configuration.maxConnectionsPerHost * 4)),
        ]
        for (option, value) in options {
            let result = CCurlShims_multi_setopt_long(handle, option, value)
            guard result == CURLM_OK else {
                curl_multi_cleanup(handle)
                sockets.deallocate()
                throw HTTPClientError(
                    code: .transport, curlCode: Int(result.rawValue),
                    message: "curl_multi_setopt(\(option.rawValue)) failed: \(String(cString: curl_multi_strerror(result)))")
            }
        }
    }

    deinit {
        curl_multi_cleanup(raw)
        sockets.deallocate()
    }

    /// Corks (`true`) or uncorks every tracked connection (`TCP_CORK`). The transfer thread corks them around
    /// `curl_multi_perform`, so that what one call writes (the HTTP/2 frames and TLS records of every request it
    /// starts, the window updates of every answer it reads) leaves in as few segments as it fills, at the uncork,
    /// instead of one `send` and one segment each. Transfer thread only.
    func corkSockets(_ on: Bool) {
        CCurlShims_sockets_cork(sockets, on ? 1 : 0)
    }

    /// Interrupts a blocking `curl_multi_poll` on the transfer thread (or makes the next one return at once).
    func wakeup() {
        _ = curl_multi_wakeup(raw)
    }
}
