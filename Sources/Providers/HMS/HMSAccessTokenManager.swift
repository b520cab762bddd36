import CurlHTTP
import Logging

/// The OAuth 2.0 token cache of one Huawei app (``OAuthTokenCache``); ``invalidate(_:)`` is called when HMS
/// refuses a token (`80200001`, `80200003`, HTTP 401).
public typealias HMSAccessTokenManager = OAuthTokenCache<HMSError>

extension HMSError: TokenFetchFailure {
    public static func tokenFetchFailed(_ message: String) -> HMSError { HMSError(source: .authentication, message: message) }
}

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
            credentials: credentials, http: httpClient, tokenURL: configuration.tokenURL,
            timeout: configuration.tokenRequestTimeout, now: now, logger: logger)
        self.init(
            refreshMargin: configuration.tokenRefreshMargin, failureBackoff: configuration.tokenFailureBackoff,
            now: now, fetch: { () async throws(HMSError) -> OAuthAccessToken in try await fetcher.fetch() })
    }
}
