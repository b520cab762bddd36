/// FCM's `errorCode` (the `google.firebase.fcm.v1.FcmError` detail of an error response).
/// See https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode.
public enum FCMErrorCode: Hashable, Sendable, CustomStringConvertible {
    /// `UNSPECIFIED_ERROR`: no more information is available.
    case unspecifiedError
    /// `INVALID_ARGUMENT`: a request parameter was invalid (the details say which field).
    case invalidArgument
    /// `UNREGISTERED`: the app instance was unregistered from FCM; the token is no longer valid.
    case unregistered
    /// `SENDER_ID_MISMATCH`: the token belongs to another sender (Firebase project).
    case senderIDMismatch
    /// `QUOTA_EXCEEDED`: a sending limit was exceeded (project-wide or per device).
    case quotaExceeded
    /// `UNAVAILABLE`: the server is overloaded.
    case unavailable
    /// `INTERNAL`: an unknown internal error occurred.
    case `internal`
    /// `THIRD_PARTY_AUTH_ERROR`: the APNs certificate or web push auth key was invalid or missing.
    case thirdPartyAuthError
    /// A code this client does not know, as FCM spelled it.
    case unknown(String)

    /// Maps FCM's spelling, e.g. `"UNREGISTERED"`.
    public init(rawValue: String) {
        switch rawValue {
        case "UNSPECIFIED_ERROR": self = .unspecifiedError
        case "INVALID_ARGUMENT": self = .invalidArgument
        case "UNREGISTERED": self = .unregistered
        case "SENDER_ID_MISMATCH": self = .senderIDMismatch
        case "QUOTA_EXCEEDED": self = .quotaExceeded
        case "UNAVAILABLE": self = .unavailable
        case "INTERNAL": self = .internal
        case "THIRD_PARTY_AUTH_ERROR": self = .thirdPartyAuthError
        default: self = .unknown(rawValue)
        }
    }

    /// FCM's spelling.
    public var rawValue: String {
        switch self {
        case .unspecifiedError: "UNSPECIFIED_ERROR"
        case .invalidArgument: "INVALID_ARGUMENT"
        case .unregistered: "UNREGISTERED"
        case .senderIDMismatch: "SENDER_ID_MISMATCH"
        case .quotaExceeded: "QUOTA_EXCEEDED"
        case .unavailable: "UNAVAILABLE"
        case .internal: "INTERNAL"
        case .thirdPartyAuthError: "THIRD_PARTY_AUTH_ERROR"
        case .unknown(let value): value
        }
    }

    public var description: String { rawValue }
}
