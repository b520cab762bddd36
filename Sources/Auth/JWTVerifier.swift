import CompactJSON
import SSLCrypto

/// Verifies compact-JWS access tokens (RFC 7515 / RFC 7519) signed with HS256, RS256 or ES256.
///
/// A token is accepted when: it has three base64url parts (at most ``maximumTokenLength`` bytes in all);
/// its header is a JSON object with an `alg` among those algorithms and no `crit`; a configured key of
/// that algorithm (and of the header's `kid`, when it names one) verifies the signature over the ASCII
/// `header.payload`; its claims are a JSON object with a numeric `exp` not yet past, an optional numeric
/// `nbf` already reached (both with `leewaySeconds` of tolerance), when an ``issuer`` is set an `iss` equal to
/// it, when an ``audience`` is set an `aud` that is it or an array holding it, and a user id: `uid` when the
/// claim is present (it must then be a non-empty string), else `sub` (a non-empty string).
///
/// Strings are compared byte for byte (UTF-8), never by Unicode canonical equivalence.
/// Header parameters that point at keys (`jwk`, `jku`, `x5u`, `x5c`) are ignored: only configured keys are
/// ever used. `iat` is not checked.
public struct JWTVerifier: Sendable {
    /// Longest token accepted, in bytes.
    public static let maximumTokenLength = 8 * 1024

    public let keys: [AuthKey]
    public let leewaySeconds: Int64
    /// When set, the `iss` claim must be exactly this string.
    public let issuer: String?
    /// When set, the `aud` claim must be this string, or an array of strings holding it.
    public let audience: String?

    /// `leewaySeconds` (clock skew tolerated on `exp` and `nbf`) is clamped to 0 ... 1 day.
    public init(keys: [AuthKey], leewaySeconds: Int64 = 30, issuer: String? = nil, audience: String? = nil) {
        self.keys = keys
        self.leewaySeconds = min(max(leewaySeconds, 0), 86_400)
        self.issuer = issuer
        self.audience = audience
    }

    /// Checks `token` at time `now` (seconds since the epoch) and returns its claims.
    public func verify(_ token: String, now: Int64) throws(TokenError) -> VerifiedToken {
        let bytes = Array(token.utf8)
        guard bytes.count <= Self.maximumTokenLength else { throw .malformed }

        // Exactly three parts.
        guard let firstDot = bytes.firstIndex(of: UInt8(ascii: ".")),
              let secondDot = bytes[(firstDot + 1)...].firstIndex(of: UInt8(ascii: ".")),
              !bytes[(secondDot + 1)...].contains(UInt8(ascii: "."))
        else { throw .malformed }
        guard let headerJSON = Base64URL.decode(bytes: bytes[..<firstDot]),
              let payloadJSON = Base64URL.decode(bytes: bytes[(firstDot + 1)..<secondDot]),
              let signature = Base64URL.decode(bytes: bytes[(secondDot + 1)...])
        else { throw .malformed }

        // Header.
        guard case .object(let header)? = try? JSONParser.parse(headerJSON, rejectDuplicateKeys: true) else {
            throw .malformed
        }
        // No extension is understood, so any `crit` must be refused (RFC 7515 §4.1.11).
        guard header["crit"] == nil else { throw .malformed }
        guard let algMember = header["alg"], case .string(let algName) = algMember else { throw .malformed }
        guard let alg = JWTAlgorithm(rawValue: algName) else {
            throw .unsupportedAlgorithm(Self.sanitisedAlgorithm(algName))
        }
        var kid: String? = nil
        if let kidMember = header["kid"] {
            guard case .string(let value) = kidMember else { throw .malformed }
            kid = value
        }

        // Signature: only keys of the header's algorithm (and kid) are candidates.
        let candidates = keys.filter { $0.algorithm == alg && (kid == nil || $0.kid == kid) }
        guard !candidates.isEmpty else { throw .noMatchingKey }
        let signingInput = Array(bytes[..<secondDot])
        guard candidates.contains(where: { Self.verifies($0, signature: signature, message: signingInput) }) else {
            throw .badSignature
        }

        // Claims, only looked at once the signature holds.
        guard case .object(let claims)? = try? JSONParser.parse(payloadJSON, rejectDuplicateKeys: true) else {
            throw .malformed
        }
        guard let expMember = claims["exp"] else { throw .missingExpiry }
        guard let exp = NumericDate(expMember) else { throw .invalidClaim("exp") }
        // Valid while now <= exp + leeway; with whole-second `now` that is now <= floor(exp) + leeway.
        guard now <= exp.floor.addingSaturating(leewaySeconds) else { throw .expired }
        if let nbfMember = claims["nbf"] {
            guard let nbf = NumericDate(nbfMember) else { throw .invalidClaim("nbf") }
            // Not yet valid while now + leeway < nbf, i.e. now + leeway < ceil(nbf).
            guard now.addingSaturating(leewaySeconds) >= nbf.ceiling else { throw .notYetValid }
        }
        if let issuer {
            guard case .string(let iss)? = claims["iss"], iss.utf8.elementsEqual(issuer.utf8) else {
                throw .invalidIssuer
            }
        }
        if let audience {
            guard let aud = claims["aud"], Self.audience(aud, holds: audience) else { throw .invalidAudience }
        }
        let uid: String
        if let uidMember = claims["uid"] {
            // Present: it is the user id, or the token is refused (no silent fallback to `sub`).
            guard case .string(let value) = uidMember, !value.isEmpty else { throw .invalidClaim("uid") }
            uid = value
        } else if case .string(let value)? = claims["sub"], !value.isEmpty {
            uid = value
        } else {
            throw .missingUID
        }
        return VerifiedToken(uid: uid, claims: claims, expiresAt: exp.floor)
    }

    /// True when `aud` is the string `expected` or an array of strings one of which is `expected` (RFC 7519
    /// §4.1.3), compared byte for byte. Any other shape (a number, an array holding a non-string) is refused.
    static func audience(_ aud: JSONValue, holds expected: String) -> Bool {
        switch aud {
        case .string(let value):
            return value.utf8.elementsEqual(expected.utf8)
        case .array(let values):
            var found = false
            for value in values {
                guard case .string(let text) = value else { return false }
                if text.utf8.elementsEqual(expected.utf8) { found = true }
            }
            return found
        default:
            return false
        }
    }

    private static func verifies(_ key: AuthKey, signature: [UInt8], message: [UInt8]) -> Bool {
        switch key {
        case .hs256(_, let secret):
            signature.count == HMACSHA256.byteCount && HMACSHA256.isValid(signature, for: message, key: secret)
        case .rs256(_, let publicKey):
            publicKey.verifyRS256(signature: signature, message: message)
        case .es256(_, let publicKey):
            publicKey.verifyES256(signature: signature, message: message)
        }
    }

    /// The header's algorithm name when it is short and plain (letters, digits, `-`, `_`, `+`, `.`), else `?`.
    static func sanitisedAlgorithm(_ name: String) -> String {
        let plain = name.utf8.count <= 16 && !name.isEmpty && name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                 UInt8(ascii: "+"), UInt8(ascii: "."):
                true
            default:
                false
            }
        }
        return plain ? name : "?"
    }
}

extension Int64 {
    fileprivate func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
