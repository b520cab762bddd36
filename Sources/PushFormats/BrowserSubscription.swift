import CompactJSON
import PushCore
import SSLCrypto

/// The `context` of a `kind: "webpush"` subscription: the browser's push subscription as
/// `PushSubscription.toJSON()` gives it, `{"endpoint":"https://…","keys":{"p256dh":"…","auth":"…"}}` (an
/// `expirationTime` member and any other member are ignored), or a JSON string holding that object.
///
/// Checked where the request is read: the endpoint is an `https://` URL as a webhook destination is
/// (``PushCore/WebhookURL``), at most 2048 bytes; `p256dh` is a P-256 public key (the 65-byte uncompressed point, in
/// base64url); `auth` is 16 bytes in base64url. The strings are kept as the browser gave them.
public struct BrowserSubscription: Sendable, Equatable {
    public static let maximumEndpointBytes = 2048

    /// Why a `context` is refused (the message names the member).
    public struct Invalid: Error, CustomStringConvertible, Sendable, Equatable {
        public let message: String
        init(_ message: String) { self.message = message }
        public var description: String { message }
    }

    public var endpoint: String
    public var p256dh: String
    public var auth: String

    public init(endpoint: String, p256dh: String, auth: String) {
        self.endpoint = endpoint
        self.p256dh = p256dh
        self.auth = auth
    }

    /// Reads and checks `value`; the error says which member is wrong and why (the API answers it with 400).
    public static func parse(_ value: JSONValue) throws(Invalid) -> BrowserSubscription {
        var object: [ExactString: JSONValue]
        switch value {
        case .object(let members):
            object = members
        case .string(let text):
            guard case .object(let members)? = try? JSONParser.parse(Array(text.utf8)) else {
                throw Invalid("a webpush 'context' must be the browser's subscription: {\"endpoint\":…,\"keys\":{\"p256dh\":…,\"auth\":…}}")
            }
            object = members
        default:
            throw Invalid("a webpush 'context' must be the browser's subscription: {\"endpoint\":…,\"keys\":{\"p256dh\":…,\"auth\":…}}")
        }
        guard let endpoint = object["endpoint"]?.stringValue else { throw Invalid("'context.endpoint' must be a string") }
        guard endpoint.utf8.count <= maximumEndpointBytes else {
            throw Invalid("'context.endpoint' is longer than \(maximumEndpointBytes) bytes")
        }
        do {
            _ = try WebhookURL(endpoint)
        } catch {
            throw Invalid("'context.endpoint': \(error.description)")
        }
        // As browsers write it (the VAPID audience is read from it).
        guard endpoint.hasPrefix("https://") else { throw Invalid("'context.endpoint' must start with https:// (lowercase)") }
        guard case .object(let keys)? = object["keys"] else {
            throw Invalid("'context.keys' must be an object with 'p256dh' and 'auth'")
        }
        guard let p256dh = keys["p256dh"]?.stringValue, let point = Base64URL.decode(p256dh),
            (try? ECPublicKey(uncompressedPoint: point)) != nil
        else { throw Invalid("'context.keys.p256dh' must be the browser's P-256 public key (65 bytes, uncompressed) in base64url") }
        guard let auth = keys["auth"]?.stringValue, Base64URL.decode(auth)?.count == 16 else {
            throw Invalid("'context.keys.auth' must be the browser's 16-byte auth secret in base64url")
        }
        return BrowserSubscription(endpoint: endpoint, p256dh: p256dh, auth: auth)
    }

    /// The stored form (``PushCore/SubscriberKey/webPushToken(endpoint:p256dh:auth:)``).
    public var token: String { SubscriberKey.webPushToken(endpoint: endpoint, p256dh: p256dh, auth: auth) }

    /// The subscription stored as `token`; nil when `token` is not one.
    public init?(token: String) {
        guard let parts = SubscriberKey.webPushParts(of: token) else { return nil }
        self.init(endpoint: String(parts.endpoint), p256dh: String(parts.p256dh), auth: String(parts.auth))
    }

    /// The API's form: `{"endpoint":…,"keys":{"p256dh":…,"auth":…}}`.
    public var json: JSONValue {
        .object(["endpoint": .string(endpoint), "keys": .object(["p256dh": .string(p256dh), "auth": .string(auth)])])
    }
}
