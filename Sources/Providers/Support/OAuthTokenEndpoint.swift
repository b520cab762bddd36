import CurlHTTP
import GatewayLogging
import Logging

/// One provider account's OAuth 2.0 token endpoint: POSTs the grant its fetcher builds (a JWT assertion for
/// Google, client credentials for Huawei), reads the answer (``OAuthTokenResponse``), logs the outcome and
/// maps failures to the provider's error type.
struct OAuthTokenEndpoint<Failure: ProviderFailure>: Sendable {
    let http: HTTPClient
    let url: String
    let timeout: Duration
    let errorStyle: OAuthTokenResponse.ErrorStyle
    /// The provider in log lines (`FCM`, `HMS`).
    let provider: String
    /// The account the tokens are for, in log lines (`fcm.client_email`, `hms.client_id`).
    let account: Logger.Metadata
    let logger: Logger

    /// Fetches a token with the form-encoded `grant`, sent at `requestedAt` (Unix seconds). Errors have source
    /// `.authentication` (or `.cancelled`).
    func fetch(grant: [UInt8], requestedAt: Double) async throws(Failure) -> OAuthAccessToken {
        let request = HTTPRequest(
            method: .post, url: url,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
            body: grant, timeout: timeout)
        let response = try await http.answer(
            to: request, unanswered: { Failure.tokenFailure(.unreachable($0)) }, cancelled: "token request cancelled")
        switch OAuthTokenResponse.read(response, requestedAt: requestedAt, errorStyle: errorStyle) {
        case .token(let token, let expiresIn):
            logger.info("\(provider) OAuth token obtained", metadata: account.merging([
                LoggingKeys.oauthToken: "\(Redaction.fingerprint(token.value))",
                LoggingKeys.oauthExpiresIn: "\(expiresIn)",
            ]) { $1 })
            return token
        case .refused(let failure):
            var metadata = account
            metadata[LoggingKeys.httpStatus] = "\(response.status)"
            metadata[LoggingKeys.oauthError] = "\(failure.error ?? "-")"
            if errorStyle == .withSubError { metadata[LoggingKeys.oauthSubError] = "\(failure.subError ?? "-")" }
            metadata[LoggingKeys.errorMessage] = "\(failure.message)"
            logger.error("\(provider) OAuth token request failed", metadata: metadata)
            throw .tokenFailure(failure)
        case .unusable(let failure):
            throw .tokenFailure(failure)
        }
    }
}
