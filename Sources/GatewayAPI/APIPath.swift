import Foundation

/// The path of a call, split on the byte `/` and each segment percent-decoded, once per call: the owner routing,
/// the hop (``ForwardTarget``) and the routes all read this one parse (``GatewayRequestContext/apiPath``).
///
/// Empty segments are kept (`/a//b` is refused by the routes, not normalised). A segment that is `.` or `..`
/// (however encoded) is refused: SPEC §3 forbids `.` in keys, and a dot-segment must never walk a path.
public struct APIPath: Sendable, Equatable {
    /// The decoded segments; the first is empty (the path starts with `/`).
    public let segments: [String]

    public init(_ path: String) throws(APIError) {
        var segments: [String] = []
        for raw in path.slashSeparatedParts() {
            guard let segment = raw.removingPercentEncoding else { throw .badRequest("bad percent-encoding in path") }
            guard segment != ".", segment != ".." else { throw .badRequest("a path segment may not be '.' or '..'") }
            segments.append(segment)
        }
        self.segments = segments
    }

    /// The app an app call is about (`/base/{app}/.wakeup…`, `/datasync/v2/{app}/subscriptions/…`,
    /// `/admin/apps/{app}`), and whether it is an admin call; nil for other paths.
    public var call: (app: String, isAdmin: Bool)? {
        guard segments.count >= 4 else { return nil }
        if segments[1] == "base", segments[3] == ".wakeup" { return segments[2].isEmpty ? nil : (segments[2], false) }
        if segments.count >= 5, segments[1] == "datasync", segments[2] == "v2", segments[4] == "subscriptions" {
            return segments[3].isEmpty ? nil : (segments[3], false)
        }
        if segments.count == 4, segments[1] == "admin", segments[2] == "apps" { return segments[3].isEmpty ? nil : (segments[3], true) }
        return nil
    }

    /// Whether a path that could not be parsed was meant as an app call (answered 400, not passed on).
    static func looksLikeAppCall(_ path: String) -> Bool {
        path.hasPrefix("/base/") || path.hasPrefix("/datasync/") || path.hasPrefix("/admin/apps/")
    }
}

extension String {
    /// The parts between the bytes `/` (empty parts kept). Splits on UTF-8 bytes, never on Swift
    /// `Character`s: a combining mark after a `/` must not glue the next key onto it.
    func slashSeparatedParts() -> [String] {
        utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }
}
