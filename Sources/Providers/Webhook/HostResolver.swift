import Dispatch
import PushCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Resolves a host name to its addresses with `getaddrinfo`, which blocks: each call runs on a dispatch queue,
/// never on the Swift concurrency pool. A webhook delivery resolves its destination once, checks every address,
/// and connects to the one it checked.
public struct HostResolver: Sendable {
    private static let queue = DispatchQueue(label: "pushgateway.webhook.resolver", attributes: .concurrent)

    public init() {}

    /// The host's addresses (IPv4 and IPv6, in the resolver's order, duplicates removed); empty when the name
    /// does not resolve. An address literal resolves to itself.
    public func resolve(_ host: String) async -> [IPAddress] {
        if let literal = IPAddress(host) { return [literal] }
        return await withCheckedContinuation { continuation in
            Self.queue.async { continuation.resume(returning: Self.lookup(host)) }
        }
    }

    static func lookup(_ host: String) -> [IPAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0 else { return [] }
        defer { freeaddrinfo(list) }
        var found: [IPAddress] = []
        var entry = list
        while let current = entry {
            if let address = current.pointee.ai_addr {
                switch Int32(address.pointee.sa_family) {
                case AF_INET:
                    address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                        var raw = v4.pointee.sin_addr
                        if let ip = IPAddress(bytes: withUnsafeBytes(of: &raw) { Array($0) }) { found.append(ip) }
                    }
                case AF_INET6:
                    address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                        var raw = v6.pointee.sin6_addr
                        if let ip = IPAddress(bytes: withUnsafeBytes(of: &raw) { Array($0) }) { found.append(ip) }
                    }
                default: break
                }
            }
            entry = current.pointee.ai_next
        }
        var seen = Set<IPAddress>()
        return found.filter { seen.insert($0).inserted }
    }
}
