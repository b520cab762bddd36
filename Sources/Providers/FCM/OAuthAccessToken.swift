/// An OAuth2 access token and its expiry. The description never shows the token.
public struct OAuthAccessToken: Sendable, CustomStringConvertible {
    /// The bearer token.
    public let value: String
    /// When it was obtained (Unix seconds, by the manager's clock).
    public let obtainedAt: Double
    /// When it expires (Unix seconds): `obtainedAt + expires_in`.
    public let expiresAt: Double

    public init(value: String, obtainedAt: Double, expiresAt: Double) {
        self.value = value
        self.obtainedAt = obtainedAt
        self.expiresAt = expiresAt
    }

    public var description: String {
        "OAuthAccessToken(\(Redaction.fingerprint(value)), expiresAt: \(expiresAt))"
    }
}
