import CurlHTTP

/// Why no OAuth access token could be obtained, in the terms each provider's error keeps
/// (``ProviderFailure/tokenFailure(_:)``).
public struct OAuthTokenFailure: Sendable {
    /// Human-readable detail: `token endpoint refused: …` (its `error_description`), `… unreachable: …`.
    public let message: String
    /// The token endpoint's HTTP status; nil when it did not answer.
    public let httpStatus: Int?
    /// The endpoint's `error` (`"invalid_grant"`; Huawei's `"1101"`).
    public let error: String?
    /// Huawei's `sub_error` (`"20356"`).
    public let subError: String?
    /// The `Retry-After` header in seconds, when present.
    public let retryAfterSeconds: Double?
    /// The transport error, when the endpoint did not answer.
    public let transportError: HTTPClientError?

    init(
        message: String, httpStatus: Int? = nil, error: String? = nil, subError: String? = nil,
        retryAfterSeconds: Double? = nil, transportError: HTTPClientError? = nil
    ) {
        self.message = message
        self.httpStatus = httpStatus
        self.error = error
        self.subError = subError
        self.retryAfterSeconds = retryAfterSeconds
        self.transportError = transportError
    }

    /// The endpoint did not answer.
    static func unreachable(_ error: HTTPClientError) -> OAuthTokenFailure {
        OAuthTokenFailure(message: "token endpoint unreachable: \(error.message)", transportError: error)
    }
}
