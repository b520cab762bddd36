import CurlHTTP
import GatewayLogging
import Logging
import SSLCrypto

/// The OAuth2 token cache of one Firebase service account (``OAuthTokenCache``); ``invalidate(_:)`` is called
/// when FCM answers 401 with a token.
public typealias FCMAccessTokenManager = OAuthTokenCache<FCMError>

extension OAuthTokenCache where Failure == FCMError {
    /// A manager that obtains tokens for `serviceAccount` from its token endpoint (or
    /// `configuration.tokenURL`) through `httpClient`. Throws if the private key cannot be loaded.
    public init(
        serviceAccount: FCMServiceAccount,
        httpClient: HTTPClient,
        configuration: FCMConfiguration = FCMConfiguration(),
        logger: Logger,
        now: @escaping @Sendable () -> Double = WallClock.now
    ) throws {
        let endpoint = OAuthTokenEndpoint<FCMError>(
            http: httpClient, url: configuration.tokenURL ?? serviceAccount.tokenURI,
            timeout: configuration.tokenRequestTimeout, errorStyle: .standard, provider: "FCM",
            account: [LoggingKeys.fcmClientEmail: "\(serviceAccount.clientEmail)"], logger: logger)
        let fetcher = GoogleTokenFetcher(
            account: serviceAccount, key: try RSAPrivateKey(pem: serviceAccount.privateKeyPEM), endpoint: endpoint,
            now: now)
        self.init(
            refreshMargin: configuration.tokenRefreshMargin, failureBackoff: configuration.tokenFailureBackoff,
            now: now, fetch: { () async throws(FCMError) -> OAuthAccessToken in try await fetcher.fetch() })
    }
}
