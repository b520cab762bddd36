#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The proxies an ``HTTPClient`` uses, set explicitly on every transfer (`CURLOPT_PROXY`, `CURLOPT_NOPROXY`).
///
/// Left unset, libcurl reads the proxy environment (`https_proxy`, `no_proxy`, ...) itself on every transfer,
/// a `getenv` scan of the whole environment several times per request. The client instead reads it once, when
/// it is created (``fromProcessEnvironment()``, libcurl's own rules), and hands libcurl the result; a change to
/// the environment after that is not seen.
public struct ProxySettings: Sendable, Equatable {
    /// The proxy for `http://` URLs (`[scheme://][user:password@]host[:port]`), nil for none.
    public var httpProxy: String?
    /// The proxy for `https://` URLs, nil for none.
    public var httpsProxy: String?
    /// Hosts reached without a proxy: comma-separated names (a name matches itself and its subdomains), IP
    /// addresses or CIDR ranges, or `*` for all. nil for none.
    public var noProxy: String?

    /// No proxy at all, whatever the environment says.
    public static let none = ProxySettings()

    public init(httpProxy: String? = nil, httpsProxy: String? = nil, noProxy: String? = nil) {
        self.httpProxy = httpProxy
        self.httpsProxy = httpsProxy
        self.noProxy = noProxy
    }

    /// The settings libcurl would derive from these environment variables: `http_proxy` (lowercase only, as
    /// libcurl does), `https_proxy` or else `HTTPS_PROXY`, `all_proxy` or else `ALL_PROXY` for a scheme without
    /// its own, `no_proxy` or else `NO_PROXY`. Empty values count as unset.
    public init(environment lookup: (String) -> String?) {
        func value(_ names: String...) -> String? {
            for name in names {
                if let found = lookup(name), !found.isEmpty { return found }
            }
            return nil
        }
        let fallback = value("all_proxy", "ALL_PROXY")
        self.init(
            httpProxy: value("http_proxy") ?? fallback,
            httpsProxy: value("https_proxy", "HTTPS_PROXY") ?? fallback,
            noProxy: value("no_proxy", "NO_PROXY"))
    }

    /// ``init(environment:)`` over the process environment, read now.
    public static func fromProcessEnvironment() -> ProxySettings {
        ProxySettings { name in getenv(name).map { String(cString: $0) } }
    }

    /// The `CURLOPT_PROXY` value for a URL: its scheme's proxy, or "" (no proxy; libcurl then reads no
    /// environment).
    func proxy(forTLS isTLS: Bool) -> String {
        (isTLS ? httpsProxy : httpProxy) ?? ""
    }
}
