/// Why ``HTTPClient/send(_:)`` did not produce a response.
///
/// HTTP error statuses (4xx, 5xx) are not errors at this level: they come back as an ``HTTPResponse``.
public struct HTTPClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case transport, overloaded, shutdown, invalidRequest, responseTooLarge
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// libcurl failed the transfer (timeout, connection refused, TLS, DNS, ...); see `curlCode`.
        public static let transport = Code(.transport)
        /// The client's queue is full (``HTTPClientConfiguration/maxQueuedRequests``).
        public static let overloaded = Code(.overloaded)
        /// The client was shut down before the request completed.
        public static let shutdown = Code(.shutdown)
        /// The request could not be given to libcurl (bad URL, header with a newline, ...).
        public static let invalidRequest = Code(.invalidRequest)
        /// The response body exceeded ``HTTPClientConfiguration/maxResponseBodySize``.
        public static let responseTooLarge = Code(.responseTooLarge)

        public var description: String {
            switch base {
            case .transport: "transport"
            case .overloaded: "overloaded"
            case .shutdown: "shutdown"
            case .invalidRequest: "invalidRequest"
            case .responseTooLarge: "responseTooLarge"
            }
        }
    }

    /// `CURLE_OPERATION_TIMEDOUT`.
    static let curlTimeoutCode = 28

    /// The kind of failure.
    public let code: Code
    /// The `CURLcode` libcurl reported, when the failure came from libcurl.
    public let curlCode: Int?
    /// Human-readable detail (libcurl's error buffer or `curl_easy_strerror`).
    public let message: String
    /// How many bytes of request libcurl wrote for this transfer (`CURLINFO_REQUEST_SIZE`): not zero when the
    /// request went out on some connection, even if the failure came later (see ``wasNotSent``).
    public let requestBytesSent: Int
    /// For a request sent at most once (``HTTPRequest/sendOnce``): the server reset the connection before it read
    /// the whole request, so its application never had it (see ``CurlEasyHandle``'s `wasResetUnread`). False
    /// when in doubt, and for every other request.
    public let wasNotRead: Bool
    /// Where the error was raised.
    public let file: String
    public let line: Int

    public init(
        code: Code, curlCode: Int? = nil, message: String, requestBytesSent: Int = 0, wasNotRead: Bool = false,
        file: String = #fileID, line: Int = #line
    ) {
        self.code = code
        self.curlCode = curlCode
        self.message = message
        self.requestBytesSent = requestBytesSent
        self.wasNotRead = wasNotRead
        self.file = file
        self.line = line
    }

    /// Whether the request certainly never reached the server: the host could not be resolved
    /// (`CURLE_COULDNT_RESOLVE_HOST`) or the connection was refused (`CURLE_COULDNT_CONNECT`), and no byte of
    /// the request was written before. Any other failure may have happened after the request was sent.
    ///
    /// The second condition matters: when a kept-alive connection dies with no answer, libcurl sends the request
    /// again, once, on a new connection, whatever its method. If that connection is refused (the server was
    /// killed after reading the request), the transfer fails with `CURLE_COULDNT_CONNECT` although the server
    /// may have acted on the first copy.
    public var wasNotSent: Bool { (curlCode == 6 || curlCode == 7) && requestBytesSent == 0 }

    /// Whether the server certainly never acted on the request: it was never sent (``wasNotSent``), or it was sent
    /// once and the server reset the connection before reading it (``wasNotRead``). Such a request may be sent
    /// again, to this server or another, whatever its method.
    public var wasNeverActedOn: Bool { wasNotSent || wasNotRead }

    /// Whether the request ran out of time (`CURLE_OPERATION_TIMEDOUT`, connect or total timeout).
    public var isTimeout: Bool { curlCode == Self.curlTimeoutCode }

    /// Whether sending the same request again later may succeed: transport failures and overload are
    /// retriable; a shut-down client, an invalid request or an oversized response are not.
    public var isRetriable: Bool { code == .transport || code == .overloaded }

    public var description: String {
        var text = "HTTPClientError.\(code)"
        if let curlCode { text += " (CURLcode \(curlCode))" }
        text += ": \(message)"
        if requestBytesSent > 0 { text += " (after \(requestBytesSent) bytes of request were written)" }
        if wasNotRead { text += " (reset by the server before it read the request)" }
        return text
    }
}
