import CurlHTTP

/// Why no OAuth access token could be obtained, in the terms each provider's error keeps
/// (``ProviderFailure/tokenFailure(_:)``).
public struct OAuthTokenFailure: Sendable {
    /// Human-readable detail: `token endpoint refused: …` (its `error_description`), `… unreachable: …`.
    public var message: String
    /// The token endpoint's HTTP status; nil when it did not answer.
    public var httpStatus: Int?
    /// The endpoint's `error` (`"invalid_grant"`; Huawei's `"1101"`).
    public var error: String?
    /// Huawei's `sub_error` (`"20356"`).
    public var subError: String?
    /// The `Retry-After` header in seconds, when present.
    public var retryAfterSeconds: Double?
    /// The transport error, when the endpoint did not answer.
    public var transportError: HTTPClientError?

    /// The endpoint did not answer.
    static func unreachable(_ error: HTTPClientError) -> OAuthTokenFailure {
        OAuthTokenFailure(message: "token endpoint unreachable: \(error.message)", transportError: error)
    }
}
