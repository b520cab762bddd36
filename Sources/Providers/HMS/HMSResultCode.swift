/// The `code` of a Huawei Push Kit (server API v1) `messages:send` answer, e.g. `"80300007"`.
///
/// HMS answers `{"code":"…","msg":"…","requestId":"…"}`, with HTTP 200 for many failures too, so the code, not
/// the HTTP status, says what happened. What each code means for delivery is decided by
/// ``HMSError/classify(source:code:httpStatus:namesToken:)``.
public enum HMSResultCode: Hashable, Sendable, CustomStringConvertible {
    /// `80000000`: success.
    case success
    /// `80100000`: some tokens succeeded, the others are listed in `msg` (`illegal_tokens`).
    case partialSuccess
    /// `80100001`: some request parameters are incorrect.
    case parameterError
    /// `80100003`: incorrect message structure.
    case invalidMessageStructure
    /// `80100004`: the message TTL is invalid (e.g. earlier than the current time).
    case invalidTTL
    /// `80200001`: OAuth authentication error (missing or unknown access token, or one of another app).
    case oauthAuthenticationError
    /// `80200003`: the OAuth access token has expired.
    case oauthTokenExpired
    /// `80300002`: the app has no permission to send messages.
    case noPermission
    /// `80300007`: all the tokens of the request are invalid.
    case allTokensInvalid
    /// `80300008`: the message body is too big.
    case messageTooBig
    /// `80300010`: the number of tokens is not between 1 and 1000.
    case tooManyTokens
    /// `80600003`: the request was rejected (OAuth or app configuration problem).
    case requestRejected
    /// `81000001`: system internal error.
    case systemError
    /// A code this client does not know, as HMS wrote it.
    case unknown(String)

    /// Maps HMS's code, e.g. `"80300007"`.
    public init(rawValue: String) {
        switch rawValue {
        case "80000000": self = .success
        case "80100000": self = .partialSuccess
        case "80100001": self = .parameterError
        case "80100003": self = .invalidMessageStructure
        case "80100004": self = .invalidTTL
        case "80200001": self = .oauthAuthenticationError
        case "80200003": self = .oauthTokenExpired
        case "80300002": self = .noPermission
        case "80300007": self = .allTokensInvalid
        case "80300008": self = .messageTooBig
        case "80300010": self = .tooManyTokens
        case "80600003": self = .requestRejected
        case "81000001": self = .systemError
        default: self = .unknown(rawValue)
        }
    }

    /// HMS's spelling.
    public var rawValue: String {
        switch self {
        case .success: "80000000"
        case .partialSuccess: "80100000"
        case .parameterError: "80100001"
        case .invalidMessageStructure: "80100003"
        case .invalidTTL: "80100004"
        case .oauthAuthenticationError: "80200001"
        case .oauthTokenExpired: "80200003"
        case .noPermission: "80300002"
        case .allTokensInvalid: "80300007"
        case .messageTooBig: "80300008"
        case .tooManyTokens: "80300010"
        case .requestRejected: "80600003"
        case .systemError: "81000001"
        case .unknown(let value): value
        }
    }

    /// Whether HMS refused our OAuth access token (`80200001`, `80200003`): worth one refresh and retry.
    public var isOAuthTokenRefusal: Bool {
        self == .oauthAuthenticationError || self == .oauthTokenExpired
    }

    public var description: String { rawValue }
}
