/// An HTTP request method (`GET`, `POST`, ...). Any token is accepted; the common ones have constants.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public static let get = HTTPMethod(rawValue: "GET")
    public static let post = HTTPMethod(rawValue: "POST")
    public static let put = HTTPMethod(rawValue: "PUT")
    public static let delete = HTTPMethod(rawValue: "DELETE")
    public static let head = HTTPMethod(rawValue: "HEAD")

    public var description: String { rawValue }
}

/// One HTTP request for ``HTTPClient/send(_:)``.
///
/// `http://` URLs are sent as HTTP/2 with prior knowledge (h2c); `https://` URLs negotiate HTTP/2 with ALPN
/// and fall back to HTTP/1.1 only when the server does not offer h2.
public struct HTTPRequest: Sendable {
    /// The request method.
    public var method: HTTPMethod
    /// The absolute `http://` or `https://` URL.
    public var url: String
    /// Header fields in order. `Content-Length` and `Host` are set by libcurl.
    public var headers: [(name: String, value: String)]
    /// The request body (empty for none).
    public var body: [UInt8]
    /// Total time allowed once libcurl starts the transfer (connect, send, wait, receive).
    /// Time spent queued in the client before that (see ``HTTPClientConfiguration/maxConcurrentRequests``)
    /// is not counted.
    public var timeout: Duration
    /// Speak HTTP/1.1 (keep-alive) instead of HTTP/2: for servers that offer no h2c, such as the gateway's
    /// own API when one replica forwards a call to another.
    public var http1: Bool = false
    /// Send the URL's path exactly as given (`CURLOPT_PATH_AS_IS`): libcurl then never squashes `/../` or `/./`
    /// segments. For calls whose path was built and checked by the caller (a call forwarded to another replica).
    public var pathAsIs: Bool = false
    /// Send the request at most once. By default, when a kept-alive HTTP/1.1 connection dies before any answer,
    /// libcurl sends the request again on another connection, whatever its method; the server may have acted on
    /// the first copy. With `sendOnce` that resend is stopped (the call fails), and a failure says whether the
    /// server certainly never read the request (``HTTPClientError/wasNotRead``). For writes whose caller decides
    /// itself whether to send them again (a call forwarded to another replica).
    public var sendOnce: Bool = false
    /// Connect to this address instead of resolving the URL's host (`CURLOPT_CONNECT_TO`): the host name still
    /// goes in `Host`, SNI and the certificate check. An IP address (IPv6 without brackets); also bypasses any
    /// proxy, so the address checked by the caller is the one connected to (webhook destinations).
    public var connectAddress: String? = nil
    /// A PEM file of CA certificates for this request, instead of the client's ``HTTPClientConfiguration/caFile``.
    public var caFile: String? = nil
    /// The response headers to keep in ``HTTPResponse/headers`` (any case), nil (the default) for all. Callers
    /// that read only a few (a provider reads `Retry-After`) save building strings for the rest.
    public var responseHeaderNames: [String]? = nil

    /// Creates a request. The default timeout is 10 seconds.
    public init(
        method: HTTPMethod = .get,
        url: String,
        headers: [(name: String, value: String)] = [],
        body: [UInt8] = [],
        timeout: Duration = .seconds(10)
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}
