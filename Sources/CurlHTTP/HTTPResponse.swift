/// The HTTP protocol version a response was received with.
public enum HTTPVersion: Hashable, Sendable, CustomStringConvertible {
    case http1_0
    case http1_1
    case http2
    case http3
    /// A value libcurl reported that this wrapper does not know.
    case unknown(Int)

    /// Maps `CURLINFO_HTTP_VERSION` (`CURL_HTTP_VERSION_*`).
    init(curlVersion: Int) {
        switch curlVersion {
        case 1: self = .http1_0
        case 2: self = .http1_1
        case 3: self = .http2
        case 30: self = .http3
        default: self = .unknown(curlVersion)
        }
    }

    public var description: String {
        switch self {
        case .http1_0: "HTTP/1.0"
        case .http1_1: "HTTP/1.1"
        case .http2: "HTTP/2"
        case .http3: "HTTP/3"
        case .unknown(let value): "HTTP(curl version \(value))"
        }
    }
}

/// A complete HTTP response (any status, including 4xx and 5xx).
public struct HTTPResponse: Sendable {
    /// The status code, e.g. 200.
    public var status: Int
    /// Header fields of the final response in order, names lowercased.
    public var headers: [(name: String, value: String)]
    /// The response body.
    public var body: [UInt8]
    /// The protocol version used for this exchange.
    public var version: HTTPVersion
    /// The local TCP port of the connection that carried the exchange (lets tests count connections).
    public var localPort: Int

    public init(
        status: Int,
        headers: [(name: String, value: String)] = [],
        body: [UInt8] = [],
        version: HTTPVersion = .http2,
        localPort: Int = 0
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.version = version
        self.localPort = localPort
    }

    /// The value of the first header named `name` (case-insensitive), if any.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }
}
