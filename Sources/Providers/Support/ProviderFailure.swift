import CurlHTTP

/// A provider's error type (``FCMError``, ``HMSError``) as the parts the providers share build it: the token
/// cache (``OAuthTokenCache``), the token endpoint (``OAuthTokenEndpoint``) and the sends
/// (``BearerTokenHTTPClient``).
public protocol ProviderFailure: Error, Sendable {
    /// No OAuth access token could be obtained (source `.authentication`).
    static func tokenFailure(_ failure: OAuthTokenFailure) -> Self
    /// No answer from the provider (source `.transport`).
    static func transportFailure(_ error: HTTPClientError) -> Self
    /// The calling task was cancelled (source `.cancelled`).
    static func cancelled(_ message: String) -> Self
}
