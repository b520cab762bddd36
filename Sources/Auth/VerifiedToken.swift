import CompactJSON

/// The claims of an access token whose signature and validity period have been checked.
public struct VerifiedToken: Sendable, Equatable {
    /// The user: claim `uid` when present (a non-empty string, else the token is refused), else `sub`.
    public let uid: String
    /// Every claim of the payload, as sent.
    public let claims: [ExactString: JSONValue]
    /// `exp` in whole seconds (rounded down when the token gave a fraction).
    public let expiresAt: Int64

    public init(uid: String, claims: [ExactString: JSONValue], expiresAt: Int64) {
        self.uid = uid
        self.claims = claims
        self.expiresAt = expiresAt
    }
}
