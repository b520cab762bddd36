/// Settings of an ``HTTPClient``.
public struct HTTPClientConfiguration: Sendable {
    /// At most this many connections per host (`CURLMOPT_MAX_HOST_CONNECTIONS`). Requests are multiplexed
    /// over HTTP/2 streams of these connections; a new connection opens only when the existing ones have no
    /// free stream. Default 2.
    public var maxConnectionsPerHost: Int
    /// At most this many concurrent streams per HTTP/2 connection (`CURLMOPT_MAX_CONCURRENT_STREAMS`); the
    /// server's own `SETTINGS_MAX_CONCURRENT_STREAMS` also applies. Default 100.
    public var maxConcurrentStreamsPerConnection: Int
    /// At most this many requests are handed to libcurl at once; further requests wait in the client's
    /// queue (their `send` stays suspended). Default 200, i.e. `maxConnectionsPerHost` ×
    /// `maxConcurrentStreamsPerConnection` for one host: beyond what the connections can carry, requests
    /// would only wait inside libcurl, whose per-transfer bookkeeping then costs measurably more CPU than
    /// waiting here (≈ 120 vs 75 µs per request at 1000 in flight over TLS).
    public var maxConcurrentRequests: Int
    /// Back-pressure bound: at most this many requests may wait in the queue for one of the
    /// `maxConcurrentRequests` places. When it is full, ``HTTPClient/send(_:)`` fails fast with
    /// ``HTTPClientError/Code/overloaded`` instead of buffering without limit. Default 10 000.
    public var maxQueuedRequests: Int
    /// Time allowed to establish a connection (TCP + TLS), capped by each request's own timeout. Default 5 s.
    public var connectTimeout: Duration
    /// A PEM file of CA certificates to trust instead of the system store (`CURLOPT_CAINFO`), e.g. a
    /// self-signed test certificate. Default nil (system store).
    public var caFile: String?
    /// Responses with a larger body fail with ``HTTPClientError/Code/responseTooLarge``. Default 1 MiB.
    public var maxResponseBodySize: Int
    /// The proxies to use; nil (the default) reads them from the process environment once, when the client is
    /// created (``ProxySettings/fromProcessEnvironment()``: `https_proxy`, `HTTPS_PROXY`, `http_proxy`,
    /// `all_proxy`, `no_proxy`, ...). A request with a ``HTTPRequest/connectAddress`` never uses a proxy.
    public var proxy: ProxySettings?
    /// A kept-alive connection idle longer than this is closed instead of reused (`CURLOPT_MAXAGE_CONN`). Keep it
    /// under the server's own idle timeout: a connection the server closes just as a request goes out on it fails
    /// that request (libcurl sends it again unless it is ``HTTPRequest/sendOnce``). Default nil: libcurl's (118 s).
    public var maxIdleConnectionAge: Duration?

    public init(
        maxConnectionsPerHost: Int = 2,
        maxConcurrentStreamsPerConnection: Int = 100,
        maxConcurrentRequests: Int = 200,
        maxQueuedRequests: Int = 10_000,
        connectTimeout: Duration = .seconds(5),
        caFile: String? = nil,
        maxResponseBodySize: Int = 1 << 20,
        proxy: ProxySettings? = nil,
        maxIdleConnectionAge: Duration? = nil
    ) {
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.maxConcurrentStreamsPerConnection = maxConcurrentStreamsPerConnection
        self.maxConcurrentRequests = maxConcurrentRequests
        self.maxQueuedRequests = maxQueuedRequests
        self.connectTimeout = connectTimeout
        self.caFile = caFile
        self.maxResponseBodySize = maxResponseBodySize
        self.proxy = proxy
        self.maxIdleConnectionAge = maxIdleConnectionAge
    }
}

extension Duration {
    /// Whole milliseconds, rounded up, clamped to `1...Int.max / 2` (libcurl treats 0 as "no timeout").
    var curlMilliseconds: Int {
        let (seconds, attoseconds) = components
        let millis = seconds.multipliedReportingOverflow(by: 1000)
        if millis.overflow || seconds >= Int64(Int.max / 4000) { return Int.max / 2 }
        let total = millis.partialValue + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Swift.max(1, Int(total))
    }
}
