import CompactJSON
import SSLCrypto

/// A key that may sign access tokens, with the one JWS algorithm it is used with.
///
/// The algorithm is part of the key: a token is only ever checked with keys of the algorithm its header
/// names, so an RSA or EC public key can never be used as an HMAC secret (no algorithm confusion).
public enum AuthKey: Sendable {
    /// Shortest HS256 secret ``parse(_:)`` accepts, in bytes: RFC 7518 §3.2 requires a key of at least the
    /// hash's size (256 bits); a shorter secret can be brute-forced from one token.
    public static let minimumHS256SecretLength = 32

    /// HMAC SHA-256 with a shared secret (``parse(_:)`` accepts ``minimumHS256SecretLength`` bytes or more).
    case hs256(kid: String?, secret: [UInt8])
    /// RSASSA-PKCS1-v1_5 SHA-256 with an RSA public key (2048 bits or more).
    case rs256(kid: String?, RSAPublicKey)
    /// ECDSA P-256 SHA-256 with an EC public key.
    case es256(kid: String?, ECPublicKey)

    /// The key id (`kid`) tokens name this key by, if any.
    public var kid: String? {
        switch self {
        case .hs256(let kid, _), .rs256(let kid, _), .es256(let kid, _): kid
        }
    }

    /// The JWS `alg` this key verifies.
    public var algorithm: JWTAlgorithm {
        switch self {
        case .hs256: .hs256
        case .rs256: .rs256
        case .es256: .es256
        }
    }

    /// Reads a key from its settings object:
    ///
    /// - `{"alg":"HS256","kid":"k1","secret":"text secret"}` (UTF-8 bytes of the text), or
    ///   `{"alg":"HS256","secretBase64":"..."}` (standard base64, for binary secrets); at least
    ///   ``minimumHS256SecretLength`` bytes either way;
    /// - `{"alg":"RS256","kid":"k2","publicKeyPEM":"-----BEGIN PUBLIC KEY-----..."}`;
    /// - `{"alg":"ES256","publicKeyPEM":"-----BEGIN PUBLIC KEY-----..."}` (P-256 only).
    ///
    /// `kid` is optional (a non-empty string when present). Unknown members are refused, so a misspelt
    /// field is reported instead of silently ignored. Errors name the offending field, never a secret.
    public static func parse(_ settings: JSONValue) throws(AuthKeyError) -> AuthKey {
        guard case .object(let members) = settings else {
            throw AuthKeyError("auth key: settings must be a JSON object")
        }
        guard let algMember = members["alg"] else { throw AuthKeyError("auth key: field 'alg' is required") }
        guard let algName = algMember.stringValue else { throw AuthKeyError("auth key: field 'alg' must be a string") }
        guard let alg = JWTAlgorithm(rawValue: algName) else {
            throw AuthKeyError("auth key: field 'alg' must be HS256, RS256 or ES256")
        }
        let context = "auth key (\(alg.rawValue))"

        var kid: String? = nil
        if let kidMember = members["kid"] {
            guard let value = kidMember.stringValue, !value.isEmpty else {
                throw AuthKeyError("\(context): field 'kid' must be a non-empty string")
            }
            kid = value
        }

        let allowed: Set<ExactString> = alg == .hs256 ? ["alg", "kid", "secret", "secretBase64"] : ["alg", "kid", "publicKeyPEM"]
        if let unknown = members.keys.filter({ !allowed.contains($0) }).sorted().first {
            throw AuthKeyError("\(context): unknown field '\(unknown.string.prefix(64))'")
        }

        switch alg {
        case .hs256:
            let secret: [UInt8]
            switch (members["secret"], members["secretBase64"]) {
            case (nil, nil):
                throw AuthKeyError("\(context): field 'secret' or 'secretBase64' is required")
            case (.some, .some):
                throw AuthKeyError("\(context): give only one of fields 'secret' and 'secretBase64'")
            case (let text?, nil):
                guard let value = text.stringValue else { throw AuthKeyError("\(context): field 'secret' must be a string") }
                secret = Array(value.utf8)
                guard !secret.isEmpty else { throw AuthKeyError("\(context): field 'secret' must not be empty") }
            case (nil, let encoded?):
                guard let value = encoded.stringValue else {
                    throw AuthKeyError("\(context): field 'secretBase64' must be a string")
                }
                guard let decoded = StandardBase64.decode(value) else {
                    throw AuthKeyError("\(context): field 'secretBase64' is not valid standard base64")
                }
                secret = decoded
                guard !secret.isEmpty else { throw AuthKeyError("\(context): field 'secretBase64' must not be empty") }
            }
            guard secret.count >= minimumHS256SecretLength else {
                throw AuthKeyError(
                    "\(context): the secret is shorter than \(minimumHS256SecretLength) bytes (256 bits); use a longer random secret")
            }
            return .hs256(kid: kid, secret: secret)

        case .rs256, .es256:
            guard let pemMember = members["publicKeyPEM"] else {
                throw AuthKeyError("\(context): field 'publicKeyPEM' is required")
            }
            guard let pem = pemMember.stringValue else {
                throw AuthKeyError("\(context): field 'publicKeyPEM' must be a string")
            }
            do {
                if alg == .rs256 { return .rs256(kid: kid, try RSAPublicKey(pem: pem)) }
                return .es256(kid: kid, try ECPublicKey(pem: pem))
            } catch {
                throw AuthKeyError("\(context): field 'publicKeyPEM': \(error)")
            }
        }
    }
}

/// The JWS algorithms access tokens may use. `none` is deliberately absent.
public enum JWTAlgorithm: String, Sendable, Hashable, CaseIterable {
    case hs256 = "HS256"
    case rs256 = "RS256"
    case es256 = "ES256"
}

/// Invalid key settings; `message` names the offending field.
public struct AuthKeyError: Error, Equatable, CustomStringConvertible, Sendable {
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// Standard base64 (RFC 4648 §4), padded or not, strict otherwise (no whitespace, no base64url characters).
enum StandardBase64 {
    static func decode(_ text: String) -> [UInt8]? {
        var bytes = Array(text.utf8)
        // Padding: at most two '=' at the end, only when the padded length is a multiple of 4.
        var padding = 0
        while let last = bytes.last, last == UInt8(ascii: "=") {
            bytes.removeLast()
            padding += 1
        }
        if padding > 0 {
            guard padding <= 2, (bytes.count + padding) % 4 == 0 else { return nil }
        }
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "+"): bytes[index] = UInt8(ascii: "-")
            case UInt8(ascii: "/"): bytes[index] = UInt8(ascii: "_")
            case UInt8(ascii: "-"), UInt8(ascii: "_"): return nil
            default: break
            }
        }
        return Base64URL.decode(bytes: bytes)
    }
}
