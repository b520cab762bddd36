import CompactJSON
import CurlHTTP

/// Reading FCM's responses: the message name of a success, the `google.rpc.Status` body of an error.
enum FCMResponseParser {
    static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    static let badRequestType = "type.googleapis.com/google.rpc.BadRequest"

    /// The `name` of a 200 answer (`projects/.../messages/...`); empty when the body is unreadable
    /// (the message was accepted all the same).
    static func messageName(from body: [UInt8]) -> String {
        (try? JSONParser.parse(body))?["name"]?.stringValue ?? ""
    }

    /// An ``FCMError`` for a non-200 answer of `messages:send`:
    /// `{"error":{"code":404,"message":"…","status":"NOT_FOUND","details":[{"@type":"…FcmError","errorCode":"UNREGISTERED"},{"@type":"…BadRequest","fieldViolations":[{"field":"message.token",…}]}]}}`.
    /// A body that is not of that shape still gives an error classified by its HTTP status.
    static func error(from response: HTTPResponse) -> FCMError {
        let retryAfter = response.header("retry-after").flatMap { RetryAfter.seconds(from: $0) }
        guard let document = try? JSONParser.parse(response.body), let error = document["error"] else {
            return FCMError(
                source: .fcm, httpStatus: response.status,
                message: "HTTP \(response.status) with an unexpected body (\(response.body.count) bytes)",
                retryAfterSeconds: retryAfter)
        }
        var code: FCMErrorCode?
        var fields: [String] = []
        for detail in error["details"]?.arrayValue ?? [] {
            switch detail["@type"]?.stringValue {
            case fcmErrorType?:
                if let raw = detail["errorCode"]?.stringValue { code = FCMErrorCode(rawValue: raw) }
            case badRequestType?:
                for violation in detail["fieldViolations"]?.arrayValue ?? [] {
                    if let field = violation["field"]?.stringValue { fields.append(field) }
                }
            default:
                break
            }
        }
        return FCMError(
            source: .fcm,
            code: code,
            httpStatus: response.status,
            status: error["status"]?.stringValue,
            message: error["message"]?.stringValue ?? "HTTP \(response.status)",
            retryAfterSeconds: retryAfter,
            fieldViolations: fields)
    }
}
