import CurlHTTP

/// Why an FCM send failed, with what the delivery layer needs to decide what to do next.
public struct FCMError: Error, Sendable, CustomStringConvertible {
    /// Where the failure happened.
    public enum Source: Hashable, Sendable, CustomStringConvertible {
        /// FCM answered `messages:send` with an error status.
        case fcm
        /// No answer from FCM (timeout, connection refused, TLS, ...); see ``FCMError/transportError``.
        case transport
        /// No OAuth2 access token could be obtained from the token endpoint.
        case authentication
        /// The calling task was cancelled.
        case cancelled

        public var description: String {
            switch self {
            case .fcm: "fcm"
            case .transport: "transport"
            case .authentication: "authentication"
            case .cancelled: "cancelled"
            }
        }
    }

    /// Google asks to wait at least this long after `QUOTA_EXCEEDED`.
    public static let quotaExceededMinimumDelaySeconds: Double = 60

    /// Where the failure happened.
    public let source: Source
    /// FCM's `errorCode` detail, when the response had one.
    public let code: FCMErrorCode?
    /// The HTTP status of the failed response (of `messages:send`, or of the token endpoint when
    /// `source` is `.authentication`); nil when there was no response.
    public let httpStatus: Int?
    /// The `google.rpc` status (`"NOT_FOUND"`, `"UNAUTHENTICATED"`, ...), or the OAuth2 `error`
    /// (`"invalid_grant"`) for `.authentication`.
    public let status: String?
    /// Human-readable detail from the response or the transport. Never contains the push token.
    public let message: String
    /// The `Retry-After` header in seconds, when present.
    public let retryAfterSeconds: Double?
    /// The `field`s of the `google.rpc.BadRequest` field violations in the response.
    public let fieldViolations: [String]
    /// The transport error, when `source` is `.transport` (or `.authentication` without a response).
    public let transportError: HTTPClientError?
    /// What to do about it; see ``classify(source:code:httpStatus:namesToken:)``.
    public let classification: ProviderClassification

    public init(
        source: Source,
        code: FCMErrorCode? = nil,
        httpStatus: Int? = nil,
        status: String? = nil,
        message: String,
        retryAfterSeconds: Double? = nil,
        fieldViolations: [String] = [],
        transportError: HTTPClientError? = nil
    ) {
        self.source = source
        self.code = code
        self.httpStatus = httpStatus
        self.status = status
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
        self.fieldViolations = fieldViolations
        self.transportError = transportError
        self.classification = Self.classify(
            source: source, code: code, httpStatus: httpStatus,
            namesToken: fieldViolations.contains(Self.tokenField))
    }

    /// The field FCM names in a violation about the registration token.
    public static let tokenField = "message.token"

    /// Whether a field violation names the registration token (`message.token`).
    public var namesToken: Bool { fieldViolations.contains(Self.tokenField) }

    /// Whether the failure was a timeout (of `messages:send` or of the token endpoint).
    public var isTimeout: Bool { transportError?.isTimeout ?? false }

    /// The shortest delay before retrying this request: `Retry-After` when given, and at least
    /// ``quotaExceededMinimumDelaySeconds`` after `QUOTA_EXCEEDED` (a project-wide limit: pause the project).
    /// Nil when the backoff policy alone decides.
    public var minimumRetryDelaySeconds: Double? {
        if code == .quotaExceeded {
            return Swift.max(retryAfterSeconds ?? 0, Self.quotaExceededMinimumDelaySeconds)
        }
        return retryAfterSeconds
    }

    /// The classification table (SPEC §8), first matching row wins:
    ///
    /// | Failure                                                         | Classification |
    /// |-----------------------------------------------------------------|----------------|
    /// | cancelled, transport error (timeout, refused, TLS, ...)         | retryable      |
    /// | token endpoint: 429, 5xx or no answer                           | retryable      |
    /// | token endpoint: other statuses (`invalid_grant`, ...)           | ourFault       |
    /// | `UNREGISTERED`, `SENDER_ID_MISMATCH`                            | tokenDead      |
    /// | `INVALID_ARGUMENT` with a field violation on `message.token`    | tokenDead      |
    /// | `INVALID_ARGUMENT` otherwise (a field of our request)           | ourFault       |
    /// | `THIRD_PARTY_AUTH_ERROR` (APNs / web push credentials)          | ourFault       |
    /// | `QUOTA_EXCEEDED`, `UNAVAILABLE`, `INTERNAL`, `UNSPECIFIED_ERROR` | retryable      |
    /// | unknown or no `errorCode`: HTTP 429 or 5xx                      | retryable      |
    /// | unknown or no `errorCode`: other 4xx (401/403 on our OAuth token, wrong project, ...) | ourFault |
    /// | anything else (unexpected status)                               | retryable      |
    ///
    /// A token is declared dead only on FCM's explicit word, so a configuration mistake can never revoke
    /// every device of an app.
    public static func classify(
        source: Source, code: FCMErrorCode?, httpStatus: Int?, namesToken: Bool
    ) -> ProviderClassification {
        switch source {
        case .cancelled, .transport:
            return .retryable
        case .authentication:
            guard let httpStatus else { return .retryable }
            return httpStatus == 429 || httpStatus >= 500 ? .retryable : .ourFault
        case .fcm:
            break
        }
        switch code {
        case .unregistered, .senderIDMismatch:
            return .tokenDead
        case .invalidArgument:
            return namesToken ? .tokenDead : .ourFault
        case .thirdPartyAuthError:
            return .ourFault
        case .quotaExceeded, .unavailable, .internal, .unspecifiedError:
            return .retryable
        case .unknown, nil:
            guard let httpStatus else { return .retryable }
            if httpStatus == 429 || httpStatus >= 500 { return .retryable }
            if (400..<500).contains(httpStatus) { return .ourFault }
            return .retryable
        }
    }

    public var description: String {
        var text = "FCMError(\(classification), source: \(source)"
        if let httpStatus { text += ", http: \(httpStatus)" }
        if let code { text += ", code: \(code)" }
        if let status { text += ", status: \(status)" }
        if let retryAfterSeconds { text += ", retryAfter: \(retryAfterSeconds)s" }
        if !fieldViolations.isEmpty { text += ", fields: \(fieldViolations)" }
        return text + "): \(message)"
    }
}

extension FCMError: ProviderFailure {
    public static func tokenFailure(_ failure: OAuthTokenFailure) -> FCMError {
        FCMError(
            source: .authentication, httpStatus: failure.httpStatus, status: failure.error, message: failure.message,
            retryAfterSeconds: failure.retryAfterSeconds, transportError: failure.transportError)
    }

    public static func transportFailure(_ error: HTTPClientError) -> FCMError {
        FCMError(source: .transport, message: error.message, transportError: error)
    }

    public static func cancelled(_ message: String) -> FCMError { FCMError(source: .cancelled, message: message) }
}

/// The outcome of ``FCMClient/send(token:data:)``.
public enum FCMSendResult: Sendable {
    /// FCM accepted the message (``FCMAcceptedMessage/name`` reads its name from the answer).
    case sent(FCMAcceptedMessage)
    /// FCM or the way to it refused; see ``FCMError/classification``.
    case failed(FCMError)
}

/// FCM's answer to an accepted message. Its body is parsed only when ``name`` is read: the delivery path never
/// reads it, and parsing every answer cost a JSON document per notification.
public struct FCMAcceptedMessage: Sendable {
    /// The 200 answer's body: `{"name":"projects/{project}/messages/{id}"}`.
    public let body: [UInt8]

    public init(body: [UInt8]) { self.body = body }

    /// The message's name, `projects/{project}/messages/{id}`; empty when the body is unreadable (the message was
    /// accepted all the same).
    public var name: String { FCMResponseParser.messageName(from: body) }
}
