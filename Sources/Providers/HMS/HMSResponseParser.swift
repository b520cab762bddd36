import CompactJSON
import CurlHTTP

/// Reading HMS's `messages:send` answers: `{"code":"80000000","msg":"Success","requestId":"…"}`.
enum HMSResponseParser {
    static let minimumRedactedLength = 8

    /// What one answer means for the single push token of the request.
    enum Outcome {
        case sent(requestID: String)
        case failed(HMSError)
    }

    /// Interprets `response` to a request for `pushToken`.
    ///
    /// `80000000` with HTTP 200 is a success. `80100000` (partial success) is parsed from its `msg`, a JSON
    /// string `{"success":0,"failure":1,"illegal_tokens":["…"]}`: the push token listed there is dead; not
    /// listed with `success` ≥ 1, it was sent. Everything else is an ``HMSError`` classified by its code,
    /// or by its HTTP status when the body has no code. HMS's `msg` is kept, with the push token redacted.
    static func outcome(of response: HTTPResponse, pushToken: String) -> Outcome {
        let retryAfter = response.header("retry-after").flatMap { RetryAfter.seconds(from: $0) }
        guard let document = try? JSONParser.parse(response.body), document.objectValue != nil else {
            return .failed(HMSError(
                source: .hms, httpStatus: response.status,
                message: "HTTP \(response.status) with an unexpected body (\(response.body.count) bytes)",
                retryAfterSeconds: retryAfter))
        }
        let code = document["code"]?.scalarText.map(HMSResultCode.init(rawValue:))
        let requestID = document["requestId"]?.stringValue
        let msg = document["msg"]?.stringValue
        if code == .success, response.status == 200 {
            return .sent(requestID: requestID ?? "")
        }
        if code == .partialSuccess {
            let report = PartialSuccess(msg: msg, pushToken: pushToken)
            if !report.namesToken, let success = report.success, success >= 1, response.status == 200 {
                return .sent(requestID: requestID ?? "")
            }
            return .failed(HMSError(
                source: .hms, code: code, httpStatus: response.status, message: report.summary,
                requestID: requestID, retryAfterSeconds: retryAfter, namesToken: report.namesToken))
        }
        return .failed(HMSError(
            source: .hms, code: code, httpStatus: response.status,
            message: redact(msg ?? "HTTP \(response.status)", pushToken), requestID: requestID,
            retryAfterSeconds: retryAfter))
    }

    /// `text` with every occurrence of the push token replaced by its fingerprint. Tokens shorter than
    /// ``minimumRedactedLength`` are left alone: real push tokens are far longer, and a few letters would
    /// match ordinary words of the message.
    static func redact(_ text: String, _ pushToken: String) -> String {
        guard pushToken.utf8.count >= minimumRedactedLength, text.contains(pushToken) else { return text }
        return text.replacing(pushToken, with: Redaction.fingerprint(pushToken))
    }

    /// The `msg` of an `80100000` answer: `{"success":N,"failure":M,"illegal_tokens":[...]}` (also accepted:
    /// `illegalTokens`, as an array or as an object of arrays keyed by reason).
    struct PartialSuccess {
        var success: Int?
        var failure: Int?
        var illegalCount = 0
        var namesToken = false

        init(msg: String?, pushToken: String) {
            guard let msg, let report = try? JSONParser.parse(msg) else { return }
            success = report["success"]?.doubleValue.flatMap { Int(exactly: $0) }
            failure = report["failure"]?.doubleValue.flatMap { Int(exactly: $0) }
            var listed: [JSONValue] = []
            for key in ["illegal_tokens", "illegalTokens"] {
                switch report[key] {
                case .array(let tokens)?: listed += tokens
                case .object(let byReason)?: for case .array(let tokens) in byReason.values { listed += tokens }
                default: break
                }
            }
            illegalCount = listed.count
            namesToken = listed.contains { $0.stringValue == pushToken }
        }

        /// A log-safe summary (the listed tokens are push tokens: never shown).
        var summary: String {
            "partial success: success \(success.map(String.init) ?? "?"), failure \(failure.map(String.init) ?? "?"), "
                + "\(illegalCount) illegal token(s)" + (namesToken ? ", this one among them" : "")
        }
    }
}
