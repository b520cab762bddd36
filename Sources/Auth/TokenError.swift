/// Why an access token was refused. Descriptions are short messages fit for an HTTP 401 body; they never
/// contain the token or anything taken from it beyond a short, sanitised algorithm name.
public enum TokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not a compact JWS of three base64url parts with JSON object header and claims, too long, or using
    /// a header feature this verifier does not support (`crit`).
    case malformed
    /// The header's `alg` is not HS256, RS256 or ES256 (for instance `none`). Carries the name when it is
    /// short and printable, else `"?"`.
    case unsupportedAlgorithm(String)
    /// No configured key has the token's algorithm (and its `kid`, when the header names one).
    case noMatchingKey
    /// No candidate key verifies the signature.
    case badSignature
    /// `exp` (plus leeway) is in the past.
    case expired
    /// `nbf` (minus leeway) is in the future.
    case notYetValid
    /// The claims have no `exp`.
    case missingExpiry
    /// A claim has the wrong type or an out-of-range value (carries its name: `exp`, `nbf`, or `uid` when it
    /// is present but not a non-empty string).
    case invalidClaim(String)
    /// The verifier has an issuer and `iss` is missing or another one.
    case invalidIssuer
    /// The verifier has an audience and `aud` is missing or does not name it.
    case invalidAudience
    /// No `uid` claim, and `sub` is not a non-empty string.
    case missingUID

    public var description: String {
        switch self {
        case .malformed: "malformed token"
        case .unsupportedAlgorithm(let alg): "unsupported token algorithm \(alg)"
        case .noMatchingKey: "no key matches the token"
        case .badSignature: "invalid token signature"
        case .expired: "token has expired"
        case .notYetValid: "token is not valid yet"
        case .missingExpiry: "token has no expiry (exp)"
        case .invalidClaim(let name): "token claim \(name) is invalid"
        case .invalidIssuer: "token issuer (iss) is not accepted"
        case .invalidAudience: "token audience (aud) is not accepted"
        case .missingUID: "token has no user id (uid or sub)"
        }
    }
}
