import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// An IPv4 or IPv6 address as bytes (4 or 16); an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is the IPv4
/// address.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init?(_ text: some StringProtocol) {
        var text = String(text)
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if let zone = text.firstIndex(of: "%") { text = String(text[..<zone]) }
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            let all = withUnsafeBytes(of: &v6) { Array($0) }
            bytes = all[0..<12].elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) ? Array(all[12...]) : all
        } else {
            return nil
        }
    }

    /// From 4 or 16 bytes.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    public var isIPv4: Bool { bytes.count == 4 }

    /// Dotted quad, or RFC 5952 text for IPv6.
    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = isIPv4 ? AF_INET : AF_INET6
        let done = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard done != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The proxies whose `X-Forwarded-For` is believed (`http.trustedProxies`): CIDRs such as `10.0.0.0/8`,
/// `fd00::/8`, or single addresses.
public struct TrustedProxies: Sendable {
    public struct InvalidCIDR: Error, Sendable {
        public let message: String
    }

    struct Range: Sendable {
        var network: [UInt8]
        var prefix: Int

        func contains(_ address: IPAddress) -> Bool {
            guard address.bytes.count == network.count else { return false }
            var left = prefix
            for (a, b) in zip(address.bytes, network) where left > 0 {
                let bits = min(8, left)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if a & mask != b & mask { return false }
                left -= bits
            }
            return true
        }
    }

    let ranges: [Range]

    public static let none = TrustedProxies(ranges: [])

    init(ranges: [Range]) { self.ranges = ranges }

    public init(_ cidrs: [String]) throws(InvalidCIDR) {
        var ranges: [Range] = []
        for text in cidrs {
            let parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let address = IPAddress(parts[0]) else {
                throw InvalidCIDR(message: "'\(text.prefix(64))' is not an address or a CIDR (e.g. 10.0.0.0/8, fd00::/8)")
            }
            let bits = address.bytes.count * 8
            var prefix = bits
            if parts.count == 2 {
                guard let value = Int(parts[1]), (0...bits).contains(value) else {
                    throw InvalidCIDR(message: "'\(text.prefix(64))': the prefix length must be 0...\(bits)")
                }
                prefix = value
            }
            ranges.append(Range(network: address.bytes, prefix: prefix))
        }
        self.ranges = ranges
    }

    public var isEmpty: Bool { ranges.isEmpty }

    public func contains(_ address: IPAddress) -> Bool { ranges.contains { $0.contains(address) } }
}

/// The address of the client a request comes from, for per-client rate limits.
public enum ClientAddress {
    /// The header that carries it to the handlers, and from a replica to the owner it forwards a call to.
    public static var header: HTTPField.Name { HTTPField.Name("x-push-client-address")! }
    /// `X-Forwarded-For`, believed from trusted proxies only.
    public static var forwardedFor: HTTPField.Name { HTTPField.Name("x-forwarded-for")! }

    /// The client's address: the connection's `peer` (an address text, nil when unknown), or, when the peer is
    /// a trusted proxy, the right-most address of `X-Forwarded-For` (every such header, in order) that is not
    /// itself a trusted proxy; the left-most one when all are. An entry that is not an address stops the walk:
    /// the last trusted proxy then counts as the client. A peer that is not trusted is the client whatever
    /// the header says (it can be forged). IPv6 clients are keyed by their /64 (one subscriber's allocation),
    /// so that inventing addresses within it gains nothing. Pure.
    public static func resolve(peer: String?, headers: HTTPFields, trusted: TrustedProxies) -> String {
        guard let peer, let peerAddress = IPAddress(peer) else { return "unknown" }
        var client = peerAddress
        if trusted.contains(peerAddress) {
            let entries = headers[values: forwardedFor]
                .flatMap { $0.split(separator: ",") }
                .map { $0.trimmingCharacters(in: .whitespaces) }
            for entry in entries.reversed() {
                guard let address = IPAddress(hostOnly(entry)) else { break }
                client = address
                if !trusted.contains(address) { break }
            }
        }
        return key(client)
    }

    /// `1.2.3.4:80` → `1.2.3.4`, `[2001:db8::1]:443` → `2001:db8::1`; anything else unchanged.
    static func hostOnly(_ entry: String) -> String {
        if entry.hasPrefix("["), let close = entry.firstIndex(of: "]") {
            return String(entry[entry.index(after: entry.startIndex)..<close])
        }
        if entry.filter({ $0 == ":" }).count == 1, let colon = entry.firstIndex(of: ":") { return String(entry[..<colon]) }
        return entry
    }

    /// IPv4 as is; IPv6 as its /64 network (`2001:db8:1:2::/64`).
    static func key(_ address: IPAddress) -> String {
        guard !address.isIPv4, let network = IPAddress(bytes: Array(address.bytes.prefix(8)) + Array(repeating: 0, count: 8)) else {
            return address.description
        }
        return network.description + "/64"
    }
}

/// The request context of the gateway's router: Hummingbird's basic context and the connection's peer.
public struct GatewayRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// The original client's address, when the call was forwarded by another replica and its hop signature
    /// checked (``OwnerRoutingMiddleware``); nil for every other call, whatever its headers say.
    public var hopClient: String?
    /// The call's path, parsed once (``OwnerRoutingMiddleware`` sets it for app calls); the routes read it.
    public var apiPath: APIPath?

    /// The call's path as parsed once, or parsed now (a router without owner routing).
    func apiPath(of request: Request) throws(APIError) -> APIPath {
        if let apiPath { return apiPath }
        return try APIPath(request.uri.path)
    }

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }
}

/// Puts the client's address in ``ClientAddress/header`` for the handlers, replacing whatever the request
/// said: the address an authentic hop named (``GatewayRequestContext/hopClient``, set by
/// ``OwnerRoutingMiddleware``), else the one resolved from the connection
/// (``ClientAddress/resolve(peer:headers:trusted:)``). Placed after ``OwnerRoutingMiddleware``.
struct ClientAddressMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let trusted: TrustedProxies

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var head = request.head
        head.headerFields[ClientAddress.header] =
            context.hopClient ?? ClientAddress.resolve(peer: context.remoteAddress?.ipAddress, headers: request.headers, trusted: trusted)
        return try await next(Request(head: head, body: request.body), context)
    }
}
