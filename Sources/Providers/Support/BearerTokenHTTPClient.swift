import CurlHTTP
import GatewayLogging
import Logging

/// POSTs JSON to one provider endpoint (FCM's or HMS's `messages:send`) with an OAuth 2.0 bearer token from
/// the account's ``OAuthTokenCache``.
///
/// The provider reads each answer (``Answer``). When it says our access token was refused, the token is
/// invalidated and the request repeated once with a fresh one; only a second refusal is reported. A token
/// that cannot be had is the token cache's failure; no answer is ``ProviderFailure/transportFailure(_:)``.
struct BearerTokenHTTPClient<Failure: ProviderFailure>: Sendable {
    /// What the provider makes of one answer.
    enum Answer<Success> {
        case sent(Success)
        case failed(Failure)
        /// Our access token was refused: worth one refresh and retry; reported as `failure` otherwise.
        /// `metadata` goes into the log line of the refresh.
        case tokenRefused(Failure, metadata: Logger.Metadata)
    }

    let http: HTTPClient
    let url: String
    let timeout: Duration
    let tokens: OAuthTokenCache<Failure>
    /// The provider in log lines (`FCM`, `HMS`).
    let provider: String
    let logger: Logger

    /// POSTs `body` (JSON) and reads the answer with `read`; `submission`, if any, is marked when the first request
    /// is handed to the HTTP client.
    func post<Success>(
        _ body: [UInt8], submission: RequestSubmission? = nil, read: (HTTPResponse) -> Answer<Success>
    ) async throws(Failure) -> Success {
        var refreshedOnce = false
        while true {
            // A token that needs no refresh is read without entering the cache's actor.
            let accessToken: String
            if let fresh = tokens.freshToken() { accessToken = fresh } else { accessToken = try await tokens.accessToken() }
            var request = HTTPRequest(
                method: .post, url: url,
                headers: [("Authorization", "Bearer \(accessToken)"), ("Content-Type", "application/json")],
                body: body, timeout: timeout)
            // The providers' answers are read from the status, the body and `Retry-After` alone.
            request.responseHeaderNames = ["retry-after"]
            // The gateway's own latency ends here, at the first request (not at the repeat after a refused token).
            if !refreshedOnce { submission?.submitted() }
            let response = try await http.answer(to: request, unanswered: Failure.transportFailure, cancelled: "send cancelled")
            switch read(response) {
            case .sent(let success):
                return success
            case .failed(let failure):
                throw failure
            case .tokenRefused(let failure, let metadata):
                guard !refreshedOnce else { throw failure }
                // Revoked or expired early: fetch a new one and try once more.
                refreshedOnce = true
                await tokens.invalidate(accessToken)
                logger.info("\(provider) refused the OAuth token; refreshing it", metadata: metadata.merging([
                    LoggingKeys.oauthToken: "\(Redaction.fingerprint(accessToken))"
                ]) { $1 })
            }
        }
    }
}
