#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A webhook `destination`, checked: `https://host[:port][/path][?query]`, printable ASCII, no user info, no
/// fragment. The host is a DNS name (letters, digits, `-`, `.`; its last label not all digits, so that libcurl
/// never reads it as a numeric IPv4 form such as `2130706433`), a dotted-quad IPv4 address or a bracketed IPv6
/// address. Pure: nothing is resolved here.
public struct WebhookURL: Sendable, Equatable {
    /// The URL as given.
    public let text: String
    /// The host, lowercased, without brackets for IPv6.
    public let host: String
    public let port: Int
    /// The host when it is an address literal.
    public let literal: IPAddress?

    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    public init(_ text: String) throws(Invalid) {
        self.text = text
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) else {
            throw Invalid("must be printable ASCII without spaces or backslashes")
        }
        guard text.lowercased().hasPrefix("https://") else { throw Invalid("must be an https:// URL") }
        let rest = text.dropFirst("https://".count)
        if rest.contains("#") { throw Invalid("must not have a fragment") }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        if authority.contains("@") { throw Invalid("must not carry user information") }
        var hostPart = authority[...]
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw Invalid("unclosed IPv6 literal") }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw Invalid("bad authority") }
                portText = after.dropFirst()
            }
            guard let address = IPAddress(String(hostPart)), address.isIPv6 else { throw Invalid("bad IPv6 literal") }
            literal = address
        } else {
            if let colon = authority.firstIndex(of: ":") {
                hostPart = authority[..<colon]
                portText = authority[authority.index(after: colon)...]
            }
            let labels = hostPart.split(separator: ".", omittingEmptySubsequences: false)
            guard !hostPart.isEmpty, hostPart.utf8.count <= 253,
                labels.allSatisfy({ !$0.isEmpty && $0.count <= 63 && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") } })
            else { throw Invalid("the host must be a DNS name or an IP address") }
            if let last = labels.last, last.allSatisfy(\.isNumber) {
                guard labels.count == 4, let address = IPAddress(String(hostPart)) else {
                    throw Invalid("a numeric host must be a dotted-quad IPv4 address")
                }
                literal = address
            } else {
                literal = nil
            }
        }
        host = hostPart.lowercased()
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isNumber), let value = Int(portText), (1...65535).contains(value)
            else { throw Invalid("bad port") }
            port = value
        } else {
            port = 443
        }
    }

    /// Why the URL's host is refused when private destinations are not allowed, judged without resolving it: an
    /// address literal in a refused range, or `localhost` (RFC 6761). Nil when it may be used (the delivery checks
    /// every address a name resolves to).
    public var refusal: String? {
        if let literal { return literal.refusal }
        if host == "localhost" || host.hasSuffix(".localhost") { return "a loopback name" }
        return nil
    }
}

/// An IPv4 or IPv6 address (network byte order), classified for webhook destinations.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 or 16 bytes.
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// A dotted quad or an IPv6 text form (`inet_pton`).
    public init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        return nil
    }

    public var isIPv6: Bool { bytes.count == 16 }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = isIPv6 ? AF_INET6 : AF_INET
        let done = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil }
        guard done else { return "?" }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The form libcurl takes in a host position: IPv6 in brackets.
    public var urlHost: String { isIPv6 ? "[\(description)]" : description }

    /// Why this address is refused as a webhook destination unless the app allows private destinations; nil
    /// for a public unicast address. Refused: unspecified, loopback, private (RFC 1918, IPv6 ULA), shared
    /// (100.64/10), link-local, IETF and benchmarking ranges, multicast, reserved and broadcast; an IPv4-mapped
    /// or NAT64 (64:ff9b::/96) IPv6 address is judged by the IPv4 address it carries.
    public var refusal: String? {
        if !isIPv6 { return Self.refusalV4(bytes[0], bytes[1], bytes[2], bytes[3]) }
        let b = bytes
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF { return Self.refusalV4(b[12], b[13], b[14], b[15]) }
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B && b[4..<12].allSatisfy({ $0 == 0 }) {
            return Self.refusalV4(b[12], b[13], b[14], b[15])
        }
        if b[0..<15].allSatisfy({ $0 == 0 }) {
            if b[15] == 0 { return "the unspecified address" }
            if b[15] == 1 { return "a loopback address" }
            return "a reserved address"
        }
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return "a link-local address" }
        if b[0] == 0xFE && b[1] & 0xC0 == 0xC0 { return "a site-local address" }
        if b[0] & 0xFE == 0xFC { return "a private address" }
        if b[0] == 0xFF { return "a multicast address" }
        return nil
    }

    private static func refusalV4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> String? {
        switch (a, b) {
        case (0, _): return "the unspecified address (0.0.0.0/8)"
        case (10, _), (172, 16...31), (192, 168): return "a private address"
        case (100, 64...127): return "a shared (carrier-grade NAT) address"
        case (127, _): return "a loopback address"
        case (169, 254): return "a link-local address"
        case (192, 0) where c == 0 || c == 2: return "a reserved address"
        case (198, 18...19): return "a reserved address"
        case (198, 51) where c == 100: return "a reserved address"
        case (203, 0) where c == 113: return "a reserved address"
        case (224...239, _): return "a multicast address"
        case (240...255, _): return "a reserved address"
        default: return nil
        }
    }
}
