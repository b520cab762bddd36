/// Settings of an ``FCMClient``.
public struct FCMConfiguration: Sendable {
    /// Google's FCM endpoint.
    public static let defaultBaseURL = "https://fcm.googleapis.com"

    /// Scheme, host and port of the FCM API, without a trailing slash; tests point it at a fake server.
    public var baseURL: String
    /// Overrides the service account's `token_uri` (and with it the assertion's `aud`); nil uses `token_uri`.
    public var tokenURL: String?
    /// Timeout of each `messages:send` request.
    public var requestTimeout: Duration
    /// Timeout of each token-endpoint request.
    public var tokenRequestTimeout: Duration
    /// Fetch a new access token this long before the current one expires (capped at half its lifetime).
    public var tokenRefreshMargin: Duration
    /// After a failed token fetch, callers get the same error without a new fetch for this long.
    public var tokenFailureBackoff: Duration

    public init(
        baseURL: String = FCMConfiguration.defaultBaseURL,
        tokenURL: String? = nil,
        requestTimeout: Duration = .seconds(10),
        tokenRequestTimeout: Duration = .seconds(10),
        tokenRefreshMargin: Duration = .seconds(300),
        tokenFailureBackoff: Duration = .seconds(1)
    ) {
        self.baseURL = baseURL
        self.tokenURL = tokenURL
        self.requestTimeout = requestTimeout
        self.tokenRequestTimeout = tokenRequestTimeout
        self.tokenRefreshMargin = tokenRefreshMargin
        self.tokenFailureBackoff = tokenFailureBackoff
    }
}

extension Duration {
    /// The duration in (fractional) seconds.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
