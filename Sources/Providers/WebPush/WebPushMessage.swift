import CurlHTTP
import PushCore
import SSLCrypto
import WebPush

/// A browser's push subscription (the `PushSubscription` a page gets from `pushManager.subscribe`): the push
/// service's endpoint URL, the browser's P-256 key (`p256dh`) and its `auth` secret.
public struct WebPushSubscription: Sendable {
    public let endpoint: String
    public let key: ECPublicKey
    public let authSecret: [UInt8]

    /// From the subscription's JSON fields: `p256dh` and `auth` in base64url. The endpoint is an outside URL checked
    /// as a webhook destination is (``WebhookURL``: https, no user info or fragment, a valid host); refuses a key that
    /// is not a P-256 point and an `auth` that is not 16 bytes.
    public init(endpoint: String, p256dh: String, auth: String) throws {
        do {
            _ = try WebhookURL(endpoint)
        } catch {
            throw WebPushError("endpoint: \(error)")
        }
        guard let point = Base64URL.decode(p256dh), let key = try? ECPublicKey(uncompressedPoint: point) else {
            throw WebPushError("p256dh must be a base64url P-256 point (65 bytes, uncompressed)")
        }
        guard let secret = Base64URL.decode(auth), secret.count == WebPushEncryption.authSecretByteCount else {
            throw WebPushError("auth must be 16 bytes in base64url")
        }
        self.endpoint = endpoint
        self.key = key
        self.authSecret = secret
    }
}

/// How soon the browser should be woken (RFC 8030 §5.3): a push service may hold a low-urgency message back to
/// save the device's battery.
public enum WebPushUrgency: String, Sendable {
    case veryLow = "very-low"
    case low
    case normal
    case high
}

/// One Web Push message as sent (RFC 8030 §5, RFC 8291, RFC 8292): the POST to the subscription's endpoint and the
/// reading of its answer.
public enum WebPushMessage {
    /// The request for `payload`: encrypted for the subscription's browser (a fresh key and salt), with `TTL` (the
    /// seconds the push service keeps it for an offline browser; required), `Urgency`, `Topic` when given (a newer
    /// message with the same topic replaces one not yet delivered), and the VAPID `Authorization` for the endpoint's
    /// origin, valid until `expiresAt`.
    public static func request(
        _ payload: [UInt8], to subscription: WebPushSubscription, vapid: VAPIDSigner, expiresAt: Int64,
        ttl: Int, urgency: WebPushUrgency = .normal, topic: String? = nil, timeout: Duration = .seconds(10)
    ) throws -> HTTPRequest {
        guard let audience = VAPIDSigner.audience(ofEndpoint: subscription.endpoint) else {
            throw WebPushError("the endpoint must be an absolute https URL")
        }
        return try request(
            payload, to: subscription, authorization: try vapid.authorization(audience: audience, expiresAt: expiresAt), ttl: ttl,
            urgency: urgency, topic: topic, timeout: timeout)
    }

    /// The same with the `Authorization` header's value already made (``VAPIDSigner/authorization(audience:expiresAt:)``
    /// for the endpoint's origin; a sender reuses one for many messages).
    public static func request(
        _ payload: [UInt8], to subscription: WebPushSubscription, authorization: String,
        ttl: Int, urgency: WebPushUrgency = .normal, topic: String? = nil, timeout: Duration = .seconds(10)
    ) throws -> HTTPRequest {
        if let topic, !isValidTopic(topic) {
            throw WebPushError("a topic is at most 32 characters of the base64url alphabet")
        }
        let body = try WebPushEncryption.encrypt(payload, userAgentKey: subscription.key, authSecret: subscription.authSecret)
        var headers: [(name: String, value: String)] = [
            ("content-type", "application/octet-stream"),
            ("content-encoding", "aes128gcm"),
            ("ttl", String(max(0, ttl))),
            ("urgency", urgency.rawValue),
            ("authorization", authorization),
        ]
        if let topic { headers.append(("topic", topic)) }
        var request = HTTPRequest(method: .post, url: subscription.endpoint, headers: headers, body: body, timeout: timeout)
        request.responseHeaderNames = ["retry-after"]
        return request
    }

    /// The `Topic` of a message with `collapseKey` (a user notification's): the key itself when it is a valid topic,
    /// else 32 base64url characters of its SHA-256 (the same key always gives the same topic).
    public static func topic(forCollapseKey collapseKey: String) -> String {
        if isValidTopic(collapseKey) { return collapseKey }
        return Base64URL.encode(Array(SHA256.hash(Array(collapseKey.utf8)).prefix(24)))
    }

    /// RFC 8030 §5.4: a topic is at most 32 characters from the URL and filename safe base64 alphabet.
    public static func isValidTopic(_ topic: String) -> Bool {
        let utf8 = topic.utf8
        return !utf8.isEmpty && utf8.count <= 32 && utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
    }

    /// What a push service's answer means:
    /// - 2xx: accepted (201 Created, with the message's `Location`).
    /// - 404, 410: the subscription is gone or expired: revoke it.
    /// - 429 and 5xx: retry, not before `Retry-After`.
    /// - 413: the message is too big for this push service: `too_big`, dropped (retrying cannot shrink it), nobody
    ///   revoked.
    /// - 400, 401, 403 and any other status: our request or our VAPID key is wrong: nobody revoked, retried, and
    ///   reported (the VAPID key is the app's to fix).
    public static func outcome(status: Int, retryAfter: String?, now: Double) -> DeliveryOutcome {
        switch status {
        case 200...299:
            return .sent
        case 404, 410:
            return .failed(DeliveryFailure(reason: "http_\(status)", classification: .tokenDead, httpStatus: status))
        case 413:
            return .failed(DeliveryFailure(reason: "too_big", classification: .rejected, httpStatus: status))
        case 429, 500...599:
            let wait = retryAfter.flatMap { RetryAfter.seconds(from: $0, now: now) }
            return .failed(DeliveryFailure(reason: "http_\(status)", classification: .retryable, retryAfter: wait, httpStatus: status))
        default:
            return .failed(DeliveryFailure(reason: "http_\(status)", classification: .ourFault, httpStatus: status))
        }
    }
}
