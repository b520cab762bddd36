import HTTPTypes

/// An API error: an HTTP status and the JSON body `{"status": code, "message": text}` (SPEC §5).
public struct APIError: Error, Sendable, Equatable {
    public var status: HTTPResponse.Status
    public var code: String
    public var message: String
    /// Seconds after which the client may try again (`Retry-After`), when the error says so.
    public var retryAfterSeconds: Int?
    /// This replica does not own the app's partition (any more): a replica that forwarded the call may send it to
    /// the owner it knows now (`x-push-not-owner` on the answer). The call had no effect.
    public var notOwner = false

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, retryAfterSeconds: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    public static func badRequest(_ message: String) -> APIError { APIError(.badRequest, "bad_request", message) }
    public static func namespaceDoesNotExist(_ app: String) -> APIError {
        APIError(.notFound, "namespace_does_not_exist", "no application named '\(app.prefix(128))'")
    }
    public static func disabled(_ app: String) -> APIError {
        APIError(.forbidden, "disabled", "push notifications are disabled for application '\(app.prefix(128))'")
    }
    public static func permissionDenied(_ message: String) -> APIError { APIError(.forbidden, "permission_denied", message) }
    public static func tooBig(_ message: String) -> APIError { APIError(.forbidden, "too_big", message) }
    public static func unauthorized(_ message: String) -> APIError { APIError(.unauthorized, "unauthorized", message) }
    public static func conflict(_ message: String) -> APIError { APIError(.conflict, "already_exists", message) }
    public static func notFound(_ message: String) -> APIError { APIError(.notFound, "not_found", message) }
    public static func unavailable(_ message: String, retryAfterSeconds: Int? = nil) -> APIError {
        APIError(.serviceUnavailable, "unavailable", message, retryAfterSeconds: retryAfterSeconds)
    }
    /// 503 from a replica that is not (or no longer) the owner of the app's partition: the call had no effect.
    public static func notOwner(_ message: String) -> APIError {
        var error = APIError(.serviceUnavailable, "unavailable", message, retryAfterSeconds: 1)
        error.notOwner = true
        return error
    }
    /// 429 `quota_exceeded`: a per-app limit on what one client can create, or the anonymous write rate.
    public static func quotaExceeded(_ message: String, retryAfterSeconds: Int? = nil) -> APIError {
        APIError(.tooManyRequests, "quota_exceeded", message, retryAfterSeconds: retryAfterSeconds)
    }
    /// 507 `insufficient_storage`: the replica holds its high-water mark of state (`state.maxReplicaBytes`).
    public static func insufficientStorage(_ message: String, retryAfterSeconds: Int? = nil) -> APIError {
        APIError(
            HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage"), "insufficient_storage", message,
            retryAfterSeconds: retryAfterSeconds)
    }
    public static func internalError(_ message: String) -> APIError { APIError(.internalServerError, "internal", message) }
}
