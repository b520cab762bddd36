import CurlHTTP
import GatewayLogging
import Logging

/// The OAuth 2.0 token cache of one Huawei app (``OAuthTokenCache``); ``invalidate(_:)`` is called when HMS
/// refuses a token (`80200001`, `80200003`, HTTP 401).
public typealias HMSAccessTokenManager = OAuthTokenCache<HMSError>

extension OAuthTokenCache where Failure == HMSError {
    /// A manager that obtains tokens for `credentials` from `configuration.tokenURL` through `httpClient`.
    public init(
        credentials: HMSCredentials,
        httpClient: HTTPClient,
        configuration: HMSConfiguration = HMSConfiguration(),
        logger: Logger,
        now: @escaping @Sendable () -> Double = WallClock.now
    ) {
        let fetcher = HMSTokenFetcher(
            credentials: credentials,
            endpoint: OAuthTokenEndpoint<HMSError>(
                http: httpClient, url: configuration.tokenURL, timeout: configuration.tokenRequestTimeout,
                errorStyle: .withSubError, provider: "HMS", account: [LoggingKeys.hmsClientId: "\(credentials.clientId)"],
                logger: logger),
            now: now)
        self.init(
            refreshMargin: configuration.tokenRefreshMargin, failureBackoff: configuration.tokenFailureBackoff,
            now: now, fetch: { () async throws(HMSError) -> OAuthAccessToken in try await fetcher.fetch() })
    }
}
