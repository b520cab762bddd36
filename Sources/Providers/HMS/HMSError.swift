import CurlHTTP

/// Why an HMS (Huawei Push Kit) send failed, with what the delivery layer needs to decide what to do next.
///
/// Classification table (SPEC §8), first matching row wins; see ``classify(source:code:httpStatus:namesToken:)``:
///
/// | Failure                                                                  | Classification |
/// |--------------------------------------------------------------------------|----------------|
/// | cancelled, transport error (timeout, refused, TLS, ...)                  | retryable      |
/// | token endpoint: 429, 5xx or no answer                                    | retryable      |
/// | token endpoint: other statuses (`1101` invalid client_secret, ...)       | ourFault       |
/// | `80100000` partial success listing the push token in `illegal_tokens`   | tokenDead      |
/// | `80100000` not listing it (and not reporting a success)                  | retryable      |
/// | `80300007` all tokens invalid (check ``isAllTokensInvalid`` for mass failures) | tokenDead |
/// | `80100001` parameter, `80100003` structure, `80100004` TTL               | ourFault       |
/// | `80200001`, `80200003` OAuth token refused (after one refresh and retry) | ourFault       |
/// | `80300002` no permission (never revoke)                                  | ourFault       |
/// | `80300008` body too big, `80300010` token count, `80600003` rejected     | ourFault       |
/// | `81000001` system internal error                                         | retryable      |
/// | unknown or no code: HTTP 429 or 5xx (503 is HMS flow control)            | retryable      |
/// | unknown or no code: other 4xx (400 parameters, 401/403 our OAuth token, 404 wrong URL) | ourFault |
/// | unknown or no code otherwise (e.g. HTTP 200 with a new code; logged)     | retryable      |
///
/// A token is declared dead only on HMS's explicit word about it. `80300007` on a single-token request is
/// such a word, but Huawei also documents it for misconfigured apps (token of another app, wrong app ID):
/// the gateway, which sees all of an app's failures, decides whether a burst of them is a mass failure
/// (``isAllTokensInvalid``) rather than revoking every device.
public struct HMSError: Error, Sendable, CustomStringConvertible {
    /// Where the failure happened.
    public enum Source: Hashable, Sendable, CustomStringConvertible {
        /// HMS answered `messages:send` with an error code or status.
        case hms
        /// No answer from HMS (timeout, connection refused, TLS, ...); see ``HMSError/transportError``.
        case transport
        /// No OAuth2 access token could be obtained from the token endpoint.
        case authentication
        /// The calling task was cancelled.
        case cancelled

        public var description: String {
            switch self {
            case .hms: "hms"
            case .transport: "transport"
            case .authentication: "authentication"
            case .cancelled: "cancelled"
            }
        }
    }

    /// Where the failure happened.
    public let source: Source
    /// HMS's result code (`"80300007"`, ...), when the answer had one.
    public let code: HMSResultCode?
    /// The HTTP status of the failed response (of `messages:send`, or of the token endpoint when `source` is
    /// `.authentication`); nil when there was no response.
    public let httpStatus: Int?
    /// The token endpoint's `error` (e.g. `"1101"`) and `sub_error` (e.g. `"20356"`), for `.authentication`.
    public let oauthError: String?
    public let oauthSubError: String?
    /// Human-readable detail (HMS's `msg`, the token endpoint's `error_description`, or the transport's).
    /// Never contains the push token.
    public let message: String
    /// HMS's `requestId`, when the answer had one.
    public let requestID: String?
    /// The `Retry-After` header in seconds, when present.
    public let retryAfterSeconds: Double?
    /// Whether a partial success (`80100000`) listed the push token among the `illegal_tokens`.
    public let namesToken: Bool
    /// The transport error, when `source` is `.transport` (or `.authentication` without a response).
    public let transportError: HTTPClientError?
    /// What to do about it; see the table on the type.
    public let classification: ProviderClassification

    public init(
        source: Source,
        code: HMSResultCode? = nil,
        httpStatus: Int? = nil,
        oauthError: String? = nil,
        oauthSubError: String? = nil,
        message: String,
        requestID: String? = nil,
        retryAfterSeconds: Double? = nil,
        namesToken: Bool = false,
        transportError: HTTPClientError? = nil
    ) {
        self.source = source
        self.code = code
        self.httpStatus = httpStatus
        self.oauthError = oauthError
        self.oauthSubError = oauthSubError
        self.message = message
        self.requestID = requestID
        self.retryAfterSeconds = retryAfterSeconds
        self.namesToken = namesToken
        self.transportError = transportError
        self.classification = Self.classify(source: source, code: code, httpStatus: httpStatus, namesToken: namesToken)
    }

    /// Whether the failure was a timeout (of `messages:send` or of the token endpoint).
    public var isTimeout: Bool { transportError?.isTimeout ?? false }

    /// Whether HMS answered `80300007` (all tokens invalid): the token is classified dead, but when many of an
    /// app's tokens fail this way at once it more likely means the app is misconfigured (SPEC §8).
    public var isAllTokensInvalid: Bool { code == .allTokensInvalid }

    /// The shortest delay before retrying this request: `Retry-After` when given; nil when the backoff policy
    /// alone decides.
    public var minimumRetryDelaySeconds: Double? { retryAfterSeconds }

    /// The classification table documented on the type.
    public static func classify(
        source: Source, code: HMSResultCode?, httpStatus: Int?, namesToken: Bool
    ) -> ProviderClassification {
        switch source {
        case .cancelled, .transport:
            return .retryable
        case .authentication:
            guard let httpStatus else { return .retryable }
            return httpStatus == 429 || httpStatus >= 500 ? .retryable : .ourFault
        case .hms:
            break
        }
        switch code {
        case .partialSuccess:
            return namesToken ? .tokenDead : .retryable
        case .allTokensInvalid:
            return .tokenDead
        case .parameterError, .invalidMessageStructure, .invalidTTL, .oauthAuthenticationError, .oauthTokenExpired,
             .noPermission, .messageTooBig, .tooManyTokens, .requestRejected:
            return .ourFault
        case .systemError:
            return .retryable
        case .success, .unknown, nil:
            guard let httpStatus else { return .retryable }
            if httpStatus == 429 || httpStatus >= 500 { return .retryable }
            if (400..<500).contains(httpStatus) { return .ourFault }
            return .retryable
        }
    }

    public var description: String {
        var text = "HMSError(\(classification), source: \(source)"
        if let httpStatus { text += ", http: \(httpStatus)" }
        if let code { text += ", code: \(code)" }
        if let oauthError { text += ", error: \(oauthError)" }
        if let oauthSubError { text += ", sub_error: \(oauthSubError)" }
        if let retryAfterSeconds { text += ", retryAfter: \(retryAfterSeconds)s" }
        if namesToken { text += ", illegal token" }
        if let requestID { text += ", requestId: \(requestID)" }
        return text + "): \(message)"
    }
}

extension HMSError: ProviderFailure {
    public static func tokenFailure(_ failure: OAuthTokenFailure) -> HMSError {
        HMSError(
            source: .authentication, httpStatus: failure.httpStatus, oauthError: failure.error,
            oauthSubError: failure.subError, message: failure.message, retryAfterSeconds: failure.retryAfterSeconds,
            transportError: failure.transportError)
    }

    public static func transportFailure(_ error: HTTPClientError) -> HMSError {
        HMSError(source: .transport, message: error.message, transportError: error)
    }

    public static func cancelled(_ message: String) -> HMSError { HMSError(source: .cancelled, message: message) }
}

/// The outcome of ``HMSClient/send(token:dataJSON:)``.
public enum HMSSendResult: Sendable {
    /// HMS accepted the message (`80000000`, or a partial success reporting it sent); `requestID` is HMS's
    /// `requestId` (empty when the answer had none).
    case sent(requestID: String)
    /// HMS or the way to it refused; see ``HMSError/classification``.
    case failed(HMSError)
}
