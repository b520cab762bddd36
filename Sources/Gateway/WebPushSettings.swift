import Foundation
import JOSE
import Providers
import PushFormats
import SSLCrypto
import WebPush

/// An app's `webPush:` settings (docs/CONFIGURATION.md): what its `kind: "webpush"` subscriptions need. Without
/// them the app refuses webpush subscriptions.
public struct WebPushSettings: Decodable, Sendable, Equatable {
    /// The app's VAPID key (RFC 8292): a P-256 private key, PEM (SEC 1 or PKCS#8) or a JWK with `d`. Its public
    /// half is the `applicationServerKey` the app's pages subscribe with (`push-gateway check-credentials` prints it).
    public var vapidKeyFile = ""
    /// The contact sent in every VAPID token (`sub`): a `mailto:` or `https:` URL of the app's operator.
    public var subject = ""
    /// Allow endpoints that are loopback, private, link-local or otherwise not public (tests, a push service inside
    /// the cluster). Default false: refused at subscribe time (address literals, `localhost`) and at each delivery
    /// (every address the name resolves to), as webhook destinations are.
    public var allowPrivateEndpoints = false
    /// A PEM file of CA certificates to trust instead of the system store (a push service with a private CA).
    public var caFile = ""
    /// Time allowed for one delivery request (connect, send, answer).
    public var timeoutMs = 15_000
    /// Seconds a push service keeps a message for an offline browser (the `TTL` header) when the notification sets
    /// none: 4 weeks, FCM's default.
    public var ttlSeconds = 2_419_200
    /// The `Urgency` of every message: `very-low`, `low`, `normal` or `high` (RFC 8030 §5.3).
    public var urgency = "normal"
    /// Requests in flight to one push service host at most, per app.
    public var maxInFlightPerHost = 64

    public init() {}

    enum CodingKeys: String, CodingKey {
        case vapidKeyFile, subject, allowPrivateEndpoints, caFile, timeoutMs, ttlSeconds, urgency, maxInFlightPerHost
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        vapidKeyFile = try c.decodeIfPresent(String.self, forKey: .vapidKeyFile) ?? vapidKeyFile
        subject = try c.decodeIfPresent(String.self, forKey: .subject) ?? subject
        allowPrivateEndpoints = try c.decodeIfPresent(Bool.self, forKey: .allowPrivateEndpoints) ?? allowPrivateEndpoints
        caFile = try c.decodeIfPresent(String.self, forKey: .caFile) ?? caFile
        timeoutMs = try c.decodeIfPresent(Int.self, forKey: .timeoutMs) ?? timeoutMs
        ttlSeconds = try c.decodeIfPresent(Int.self, forKey: .ttlSeconds) ?? ttlSeconds
        urgency = try c.decodeIfPresent(String.self, forKey: .urgency) ?? urgency
        maxInFlightPerHost = try c.decodeIfPresent(Int.self, forKey: .maxInFlightPerHost) ?? maxInFlightPerHost
    }

    func validate() throws(ConfigurationError) {
        guard !vapidKeyFile.isEmpty else { throw ConfigurationError("webPush.vapidKeyFile is required (the app's VAPID P-256 private key)") }
        guard subject.hasPrefix("mailto:") || subject.hasPrefix("https:") else {
            throw ConfigurationError("webPush.subject must be a mailto: or https: URL (the operator's contact, RFC 8292)")
        }
        guard (100...120_000).contains(timeoutMs) else { throw ConfigurationError("webPush.timeoutMs must be between 100 and 120000") }
        guard (0...2_419_200 * 2).contains(ttlSeconds) else { throw ConfigurationError("webPush.ttlSeconds must be between 0 and 4838400") }
        guard WebPushUrgency(rawValue: urgency) != nil else {
            throw ConfigurationError("webPush.urgency must be very-low, low, normal or high")
        }
        guard (1...1000).contains(maxInFlightPerHost) else { throw ConfigurationError("webPush.maxInFlightPerHost must be between 1 and 1000") }
    }

    /// The VAPID signer of the key file and subject.
    public func signer() throws(ConfigurationError) -> VAPIDSigner {
        let text: String
        do {
            text = try String(contentsOfFile: vapidKeyFile, encoding: .utf8)
        } catch {
            throw ConfigurationError("webPush.vapidKeyFile \(vapidKeyFile): cannot read it")
        }
        let keys: [JWEKey]
        do {
            keys = try KeyFile.load(text: text, kid: "vapid")
        } catch {
            throw ConfigurationError("webPush.vapidKeyFile \(vapidKeyFile): \(error.description)")
        }
        guard keys.count == 1, let key = keys[0].ecPrivateKey else {
            throw ConfigurationError("webPush.vapidKeyFile \(vapidKeyFile): expected one P-256 private key")
        }
        do {
            return try VAPIDSigner(key: key, subject: subject)
        } catch {
            throw ConfigurationError("webPush.vapidKeyFile \(vapidKeyFile): \(error)")
        }
    }

    /// The client's settings.
    var clientSettings: WebPushClient.Settings {
        WebPushClient.Settings(
            allowPrivateEndpoints: allowPrivateEndpoints, caFile: caFile.isEmpty ? nil : caFile, timeout: .milliseconds(timeoutMs),
            ttlSeconds: ttlSeconds, urgency: WebPushUrgency(rawValue: urgency) ?? .normal)
    }
}
