/// Settings of an ``HMSClient``.
public struct HMSConfiguration: Sendable {
    /// Huawei's Push Kit endpoint.
    public static let defaultBaseURL = "https://push-api.cloud.huawei.com"
    /// Huawei's OAuth 2.0 token endpoint.
    public static let defaultTokenURL = "https://oauth-login.cloud.huawei.com/oauth2/v3/token"

    /// Scheme, host and port of the Push Kit API, without a trailing slash; tests point it at a fake server.
    public var baseURL: String
    /// The OAuth 2.0 token endpoint (client-credentials grant).
    public var tokenURL: String
    /// Timeout of each `messages:send` request.
    public var requestTimeout: Duration
    /// Timeout of each token-endpoint request.
    public var tokenRequestTimeout: Duration
    /// Fetch a new access token this long before the current one expires (capped at half its lifetime).
    public var tokenRefreshMargin: Duration
    /// After a failed token fetch, callers get the same error without a new fetch for this long.
    public var tokenFailureBackoff: Duration

    public init(
        baseURL: String = HMSConfiguration.defaultBaseURL,
        tokenURL: String = HMSConfiguration.defaultTokenURL,
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
