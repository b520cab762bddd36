import Foundation

/// The request target of an app call, checked and rebuilt before the call may be forwarded to another replica:
/// only what the API itself would read crosses the hop.
///
/// - Only origin-form targets (`/…`) are taken: an absolute-form (`http://host/…`), authority-form or `*…`
///   target is refused, so nothing a client writes can become the host, port or userinfo of the forwarded URL.
/// - The path is the call's ``APIPath``: split on the byte `/`, each segment percent-decoded, no `.` or `..`
///   segment (however encoded), so a dot-segment never walks the owner's paths.
/// - The forwarded target is rebuilt from the decoded segments and the API's known query parameters, each
///   percent-encoded again (unreserved bytes only left as they are), so the owner reads exactly what this
///   replica read. Unknown query parameters are dropped.
public struct ForwardTarget: Sendable, Equatable {
    /// The decoded path segments (the first is empty: the path starts with `/`).
    public let segments: [String]
    /// The API's query parameters present in the call, decoded, in their order.
    public let query: [(name: String, value: String)]

    /// The query parameters the API reads (v1: `id`, `mode`, `token`; v2: `allowsUpdate`).
    public static let knownParameters: Set<String> = ["id", "mode", "token", "allowsUpdate"]

    public static func == (left: ForwardTarget, right: ForwardTarget) -> Bool {
        left.segments == right.segments && left.query.elementsEqual(right.query, by: { $0 == $1 })
    }

    /// Checks `target` (the request line's target, as received) and takes `path`, its path as parsed once per
    /// call. `queryParameters` are the decoded parameters as the API's routes read them.
    public init(target: String, path: APIPath, queryParameters: [(name: String, value: String)]) throws(APIError) {
        guard target.utf8.first == UInt8(ascii: "/"), !target.utf8.starts(with: "//".utf8) else {
            throw .badRequest("the request target must be a path starting with a single '/' (origin-form)")
        }
        self.segments = path.segments
        self.query = queryParameters.filter { Self.knownParameters.contains($0.name) }
    }

    /// Checks `target` and parses its `path` (``APIPath``).
    public init(target: String, path: String, queryParameters: [(name: String, value: String)]) throws(APIError) {
        try self.init(target: target, path: try APIPath(path), queryParameters: queryParameters)
    }

    /// The rebuilt origin-form target: `/seg/seg?name=value&…`, every byte but the unreserved ones encoded.
    public var pathAndQuery: String {
        var text = segments.dropFirst().map { "/" + Self.encode($0) }.joined()
        if text.isEmpty { text = "/" }
        if !query.isEmpty {
            text += "?" + query.map { Self.encode($0.name) + "=" + Self.encode($0.value) }.joined(separator: "&")
        }
        return text
    }

    /// Percent-encodes every byte except RFC 3986's unreserved ones (`A–Z a–z 0–9 - . _ ~`).
    static func encode(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                bytes.append(byte)
            default:
                bytes.append(UInt8(ascii: "%"))
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0x0F)])
            }
        }
        out = String(decoding: bytes, as: UTF8.self)
        return out
    }
}
