import Foundation
import PushCore
import SSLCrypto

/// Auth tokens of the built-in `demo` app (embedded defaults only): HS256 JWTs signed with its published
/// secret (``secret``), `kid` `demo`. The banner prints one; `push-gateway demo-token` mints
/// others for any uid and lifetime.
public enum DemoToken {
    /// The `demo` app's HS256 secret: published, so that anyone can mint its tokens (never in production).
    public static let secret = "demo-secret-for-the-embedded-defaults-only"

    /// A token of user `uid` that expires `lifetimeSeconds` after `now`.
    public static func mint(uid: String, lifetimeSeconds: Int64, now: Date = Date()) throws -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","kid":"demo","typ":"JWT"}"#.utf8))
        let exp = Int64(now.timeIntervalSince1970) + lifetimeSeconds
        let claims = JSONValue.object(["exp": .number(String(exp)), "uid": .string(uid)])
        let payload = Base64URL.encode(JSONWriter.bytes(claims))
        let input = Array("\(header).\(payload)".utf8)
        let signature = try HMACSHA256.authenticationCode(for: input, key: Array(secret.utf8))
        return "\(header).\(payload).\(Base64URL.encode(signature))"
    }

    /// Parses a lifetime: seconds (`3600`) or a number with a unit `s`, `m`, `h` or `d` (`90m`, `24h`, `7d`).
    public static func lifetimeSeconds(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = text.last, let factor = units[last] {
            digits = text.dropLast()
            unit = factor
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let count = Int64(digits), count > 0 else { return nil }
        let (seconds, overflow) = count.multipliedReportingOverflow(by: unit)
        return overflow ? nil : seconds
    }
}
