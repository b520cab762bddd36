import CCurl
import CCurlShims
import DequeModule

/// Works around a libcurl bug for HTTP/2 over cleartext (h2c, `http://` URLs) on libcurl < 8.0.0, such as
/// Debian 12's 7.88.1: a request with `CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE` that *reuses* an h2c connection
/// fails with `CURLE_HTTP2` ("Error in the HTTP2 framing layer", curl issue #10634, fixed in 8.0.0), while a
/// request with `CURL_HTTP_VERSION_2_0` reuses it fine (but would open a *new* connection with an
/// HTTP/1.1 `Upgrade: h2c` instead of prior knowledge).
///
/// So per cleartext origin: one prior-knowledge "probe" request opens a fresh connection while the others
/// wait here; once it answered over HTTP/2, requests use `CURL_HTTP_VERSION_2_0` and multiplex on that
/// connection, at most `maxActivePerOrigin` at a time so libcurl never needs a second connection (which it
/// would open with `Upgrade`). If a response comes back over HTTP/1.x, or a request fails with anything but a
/// timeout (`CURLE_HTTP2`, a refused stream, a GOAWAY, a dropped connection: the connection was lost, and
/// libcurl's own retry went out on a new one), the origin goes back to probing. `https://` URLs are never gated (ALPN works).
/// Confined to the transfer thread.
struct CleartextHTTP2Gate {
    /// Whether the loaded libcurl has the bug (checked at run time, not against the headers).
    static let isNeeded: Bool = CCurlShims_version_num() < 0x08_00_00

    /// How a started request must be configured.
    enum Mode {
        /// `CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE` on a fresh connection (`CURLOPT_FRESH_CONNECT`).
        case probe
        /// `CURL_HTTP_VERSION_2_0`: reuse the established h2c connection.
        case reuse
    }

    private enum Phase {
        case unknown, probing(id: UInt64), established
    }

    /// An origin's state, a reference: changed in place (a struct taken out of the dictionary and written back
    /// would copy its held requests on every change).
    private final class Origin {
        var phase = Phase.unknown
        var active = 0
        /// Waiting in arrival order (a deque: the head leaves in O(1)).
        var held = Deque<RequestSlot>()
    }

    private let maxActivePerOrigin: Int
    private var origins: [String: Origin] = [:]
    /// Requests waiting here, over all origins (they count against the client's concurrency limit).
    private(set) var heldCount = 0

    init(maxActivePerOrigin: Int) {
        self.maxActivePerOrigin = Swift.max(1, maxActivePerOrigin)
    }

    /// `http://host:port` of a cleartext URL, nil for anything else.
    static func origin(of url: String) -> String? {
        guard url.utf8.starts(with: "http://".utf8) else { return nil }
        let rest = url.utf8.dropFirst(7)
        let end = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        return String(url[url.startIndex..<end])
    }

    /// Starts `slot` now in the returned mode, or holds it (nil) until `finished` releases it.
    mutating func admit(_ slot: RequestSlot, origin: String) -> Mode? {
        let entry: Origin
        if let known = origins[origin] {
            entry = known
        } else {
            entry = Origin()
            origins[origin] = entry
        }
        if let mode = Self.decide(entry, slot.id, maxActivePerOrigin) { return mode }
        entry.held.append(slot)
        heldCount += 1
        return nil
    }

    /// Records the end of an admitted request; returns held requests that may start now, with their mode.
    /// `usedHTTP2`: it got a response over HTTP/2. `connectionSuspect`: it got a response over HTTP/1.x or
    /// failed with a transport error other than a timeout, i.e. libcurl may no longer be on the established h2c
    /// connection.
    mutating func finished(id: UInt64, origin: String, usedHTTP2: Bool, connectionSuspect: Bool) -> [(RequestSlot, Mode)] {
        guard let entry = origins[origin] else { return [] }
        entry.active -= 1
        switch entry.phase {
        case .probing(let probeID) where probeID == id:
            entry.phase = usedHTTP2 ? .established : .unknown
        case .established where connectionSuspect:
            entry.phase = .unknown
        default:
            break
        }
        var released: [(RequestSlot, Mode)] = []
        var left = 0
        while let slot = entry.held.first {
            if slot.isFinished {  // cancelled while held
                entry.held.removeFirst()
                left += 1
                continue
            }
            guard let mode = Self.decide(entry, slot.id, maxActivePerOrigin) else { break }
            entry.held.removeFirst()
            left += 1
            released.append((slot, mode))
        }
        heldCount -= left
        if entry.active == 0 && entry.held.isEmpty, case .unknown = entry.phase {
            origins[origin] = nil
        }
        return released
    }

    /// Removes and returns every held request (shutdown).
    mutating func takeAllHeld() -> [RequestSlot] {
        let all = origins.values.flatMap(\.held)
        origins.removeAll()
        heldCount = 0
        return all
    }

    private static func decide(_ entry: Origin, _ id: UInt64, _ maxActive: Int) -> Mode? {
        switch entry.phase {
        case .established where entry.active < maxActive:
            entry.active += 1
            return .reuse
        case .unknown:
            entry.phase = .probing(id: id)
            entry.active += 1
            return .probe
        case .established, .probing:
            return nil
        }
    }
}
