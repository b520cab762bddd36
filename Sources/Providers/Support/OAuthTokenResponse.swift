import CompactJSON
import CurlHTTP

/// Reads an OAuth 2.0 token endpoint's answer (RFC 6749 §5.1, §5.2), Google's and Huawei's alike:
/// `{"access_token":"…","expires_in":3600,"token_type":"Bearer"}`, or an error status with
/// `{"error":"invalid_grant","error_description":"…"}` (Huawei: `{"error":1101,"sub_error":20356,…}`).
enum OAuthTokenResponse {
    /// How the endpoint writes its `error`.
    enum ErrorStyle: Sendable {
        /// A string, as RFC 6749 has it (Google).
        case standard
        /// A number or a string, with a `sub_error` beside it (Huawei).
        case withSubError
    }

    /// What one answer gave.
    enum Outcome {
        /// The token, and its `expires_in` as the endpoint wrote it.
        case token(OAuthAccessToken, expiresIn: Double)
        /// An error status: the endpoint refused the request.
        case refused(OAuthTokenFailure)
        /// HTTP 200 without a usable bearer token.
        case unusable(OAuthTokenFailure)
    }

    /// Reads `response` to a request sent at `requestedAt` (Unix seconds, the start of the token's lifetime).
    static func read(_ response: HTTPResponse, requestedAt: Double, errorStyle: ErrorStyle) -> Outcome {
        let document = try? JSONParser.parse(response.body)
        guard response.status == 200 else {
            let error: String?
            let subError: String?
            switch errorStyle {
            case .standard: (error, subError) = (document?["error"]?.stringValue, nil)
            case .withSubError: (error, subError) = (document?["error"]?.scalarText, document?["sub_error"]?.scalarText)
            }
            return .refused(OAuthTokenFailure(
                message: "token endpoint refused: "
                    + (document?["error_description"]?.stringValue ?? "HTTP \(response.status)"),
                httpStatus: response.status, error: error, subError: subError,
                retryAfterSeconds: response.header("retry-after").flatMap { RetryAfter.seconds(from: $0) }))
        }
        guard let token = document?["access_token"]?.stringValue, !token.isEmpty,
              let expiresIn = document?["expires_in"]?.doubleValue, expiresIn > 0
        else {
            return .unusable(OAuthTokenFailure(
                message: "token endpoint answered 200 without access_token/expires_in", httpStatus: response.status))
        }
        if let type = document?["token_type"]?.stringValue, type.lowercased() != "bearer" {
            return .unusable(OAuthTokenFailure(
                message: "token endpoint issued an unsupported token_type \(type)", httpStatus: response.status))
        }
        return .token(
            OAuthAccessToken(value: token, obtainedAt: requestedAt, expiresAt: requestedAt + expiresIn), expiresIn: expiresIn)
    }
}
