import CompactJSON
import CurlHTTP

/// One APNs background push as sent (Apple's "Sending notification requests to APNs"): the HTTP/2 POST to
/// `/3/device/<token>` and the reading of its answer.
///
/// The body is `{"aps":{"content-available":1},"data":<the data payload>}`: a silent wake-up carrying the same
/// data document the other channels carry (copied verbatim), at most 4,096 bytes in all (APNs' limit).
public enum APNsMessage {
    /// APNs' limit on a notification's payload.
    public static let maximumPayloadBytes = 4096
    /// The production and development hosts.
    public static let productionBaseURL = "https://api.push.apple.com"
    public static let developmentBaseURL = "https://api.sandbox.push.apple.com"

    /// The request for `data` (a serialised JSON object) to the device `token` (hex) of the app `bundleID`, with the
    /// team's provider token: `apns-push-type: background`, `apns-priority: 5` (Apple requires 5 for background
    /// pushes), `apns-topic` the bundle id, `apns-expiration` when given (unix seconds; 0: try once), and
    /// `apns-collapse-id` when the notification coalesces (at most 64 bytes: a longer key is sent hashed, as FCM's
    /// APNs relay does).
    public static func request(
        data: [UInt8], token: String, bundleID: String, providerToken: String, baseURL: String = productionBaseURL,
        expiration: Int64? = nil, collapseKey: String? = nil, timeout: Duration = .seconds(10)
    ) throws -> HTTPRequest {
        guard isValidDeviceToken(token) else { throw APNsMessageError("the device token must be hex (an even number of digits, at most 200)") }
        var body: [UInt8] = Array(#"{"aps":{"content-available":1},"data":"#.utf8)
        body += data
        body.append(UInt8(ascii: "}"))
        guard body.count <= maximumPayloadBytes else {
            throw APNsMessageError("the payload is \(body.count) bytes; APNs takes at most \(maximumPayloadBytes)")
        }
        var headers: [(name: String, value: String)] = [
            ("authorization", "bearer " + providerToken),
            ("apns-push-type", "background"),
            ("apns-priority", "5"),
            ("apns-topic", bundleID),
        ]
        if let expiration { headers.append(("apns-expiration", String(max(0, expiration)))) }
        if let collapseKey { headers.append(("apns-collapse-id", FCMMessageEncoder.apnsCollapseID(collapseKey))) }
        var request = HTTPRequest(method: .post, url: baseURL + "/3/device/" + token, headers: headers, body: body, timeout: timeout)
        request.responseHeaderNames = ["retry-after"]
        return request
    }

    /// A device token as APNs gives it to the app, in hex (32 bytes today; Apple says its length may grow).
    public static func isValidDeviceToken(_ token: String) -> Bool {
        let utf8 = token.utf8
        return !utf8.isEmpty && utf8.count <= 200 && utf8.count % 2 == 0 && utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
        }
    }

    /// What an APNs answer means, from its status and the `reason` of its JSON body:
    /// - 200: delivered to APNs.
    /// - `BadDeviceToken`, `Unregistered` (410, with the time the token stopped being valid),
    ///   `DeviceTokenNotForTopic`: the token is dead for this app: revoke the subscription.
    /// - `TooManyRequests` (429), 5xx (`InternalServerError`, `ServiceUnavailable`, `Shutdown`): retry, not before
    ///   `Retry-After`.
    /// - `PayloadTooLarge` (413): `too_big`, dropped; nobody revoked.
    /// - `ExpiredProviderToken`, `InvalidProviderToken`, `MissingProviderToken`, `BadTopic`, `TopicDisallowed`,
    ///   `BadCertificate…` and every other refusal: our request or credentials: nobody revoked, retried, reported.
    ///   `providerTokenRefused` says when renewing the provider token may be the cure (``APNsProviderToken/refused(_:)``).
    public static func outcome(status: Int, body: [UInt8], retryAfter: String?, now: Double) -> (outcome: DeliveryOutcome, providerTokenRefused: Bool) {
        if status == 200 { return (.sent, false) }
        var reason = ""
        var timestamp: String?
        if case .object(let members)? = try? JSONParser.parse(body) {
            if case .string(let text)? = members["reason"] { reason = text }
            if case .number(let lexeme)? = members["timestamp"] { timestamp = lexeme }
        }
        let named = reason.isEmpty ? "http_\(status)" : reason
        switch (status, reason) {
        case (410, _), (_, "BadDeviceToken"), (_, "Unregistered"), (_, "DeviceTokenNotForTopic"):
            let message = timestamp.map { "invalid since \($0) ms" }
            return (.failed(DeliveryFailure(reason: named, classification: .tokenDead, httpStatus: status, message: message)), false)
        case (429, _), (500...599, _):
            let wait = retryAfter.flatMap { RetryAfter.seconds(from: $0, now: now) }
            return (.failed(DeliveryFailure(reason: named, classification: .retryable, retryAfter: wait, httpStatus: status)), false)
        case (413, _), (_, "PayloadTooLarge"):
            return (.failed(DeliveryFailure(reason: "too_big", classification: .rejected, httpStatus: status)), false)
        default:
            let tokenRefused = reason == "ExpiredProviderToken" || reason == "InvalidProviderToken"
            return (.failed(DeliveryFailure(reason: named, classification: .ourFault, httpStatus: status)), tokenRefused)
        }
    }
}

/// An APNs notification that cannot be built; the message says why.
public struct APNsMessageError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = "APNs: " + description }
}
