import CompactJSON
import Foundation
import GatewayEmbedded

/// The "console" settings of one app (SPEC §6), as written in the main configuration's `apps` section or in
/// one file per app in the settings directory (docs/CONFIGURATION.md). Absent fields keep their defaults.
public struct AppSettings: Decodable, Sendable, Equatable {
    /// False: the API answers 403 `disabled` and every subscription is revoked with `disabled`.
    public var enabled = true
    /// Firebase service-account JSON file; empty: notifications go to the console sink.
    public var fcmServiceAccountFile = ""
    /// How the app's FCM project is paced (``FCMSettings``).
    public var fcm = FCMSettings()
    /// Default and maximum lifetime of a subscription.
    public var subscriptionTTLSeconds: Int64 = 30 * 24 * 3600
    /// The longest subscription lifetime accepted (ten years).
    static let maximumTTLSeconds: Int64 = 10 * 366 * 24 * 3600
    /// A `value`/`childEvent` node whose data is larger than this is refused (403) or revoked: `too_big`.
    public var shadowMaxBytes = 64 * 1024
    /// Huawei Push Kit credentials (sending through HMS is issue 5's; they are validated now).
    public var hms: HMSSettings?
    /// Keys that verify the app's auth tokens: `{"alg":"HS256","kid":…,"secret":…}`,
    /// `{"alg":"RS256"|"ES256","kid":…,"publicKeyPEM":…}`.
    public var authKeys: [JSONValue] = []
    /// When set, a token's `iss` claim must be exactly this (e.g. `https://securetoken.google.com/<project>`).
    public var issuer: String?
    /// When set, a token's `aud` claim must be this, or an array holding it (e.g. the Firebase project id).
    public var audience: String?
    /// Notification encryption: `{"active":"k1","keys":[JWK, …]}`; absent: v2 payloads are unsecured JWS.
    public var encryption: JSONValue?
    /// Firebase-style read rules `{"rules":{…}}`; absent: every path is readable.
    public var rules: JSONValue?
    /// Limits on what one client can create (``AppQuotas``).
    public var quotas = AppQuotas()
    /// `kind: "webhook"` subscriptions: signing secrets, private destinations, limits (``WebhookSettings``).
    public var webhook: WebhookSettings?
    /// `kind: "webpush"` subscriptions: the VAPID key and contact, private endpoints, TTL, urgency (``WebPushSettings``).
    public var webPush: WebPushSettings?
    /// `kind: "apns"` subscriptions: the team, auth key and bundle id of APNs token authentication (``APNsSettings``).
    public var apns: APNsSettings?
    /// Where the app's backend hears of ended subscriptions (``EventHookSettings``); signed with `webhook.secrets`.
    public var eventHook: EventHookSettings?

    public init() {}

    /// The secret of the embedded default app `demo` (its v2 API needs tokens; the start-up banner prints one).
    /// Only served with the embedded defaults (``GatewayConfiguration/servesDemoApp``): never a production secret.
    public static var demoSecret: String { DemoToken.secret }

    /// The embedded default app: console sink, HS256 tokens signed with ``demoSecret``.
    public static var demo: AppSettings {
        var settings = AppSettings()
        settings.authKeys = [.object(["alg": .string("HS256"), "kid": .string("demo"), "secret": .string(demoSecret)])]
        return settings
    }

    /// The app's FCM project: its send quota, at which the gateway paces it (docs/DELIVERY.md, "Pacing").
    public struct FCMSettings: Decodable, Sendable, Equatable {
        /// Sends per minute the project may make (FCM's default quota: 600,000); 0: unpaced. Apps that share a
        /// project should give it the same value (the one of the app whose notification goes next applies).
        public var maxSendsPerMinute = 600_000

        public init() {}

        enum CodingKeys: String, CodingKey { case maxSendsPerMinute }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            maxSendsPerMinute = try c.decodeIfPresent(Int.self, forKey: .maxSendsPerMinute) ?? maxSendsPerMinute
        }
    }

    public struct HMSSettings: Decodable, Sendable, Equatable {
        public var appId = ""
        public var clientId = ""
        public var clientSecret = ""
        public var clientSecretFile = ""
        /// Sends per second the HMS app may make; 0 (the default): unpaced. Huawei publishes no default
        /// per-app rate (it is set per app on request), so there is nothing to default to: set the app's.
        public var maxSendsPerSecond = 0

        /// The client secret: `clientSecretFile`'s content (surrounding white space trimmed) when it is set,
        /// else `clientSecret`.
        public func secret() throws(ConfigurationError) -> String {
            guard !clientSecretFile.isEmpty else { return clientSecret }
            do {
                return try String(contentsOfFile: clientSecretFile, encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            } catch {
                throw ConfigurationError("hms.clientSecretFile \(clientSecretFile): cannot read it")
            }
        }
    }

    func validate() throws(ConfigurationError) {
        // Up to ten years: an expiry is `now + subscriptionTTLSeconds`, which must not overflow.
        guard subscriptionTTLSeconds > 0, subscriptionTTLSeconds <= Self.maximumTTLSeconds else {
            throw ConfigurationError("subscriptionTTLSeconds must be between 1 and \(Self.maximumTTLSeconds) (ten years)")
        }
        guard shadowMaxBytes > 0 else { throw ConfigurationError("shadowMaxBytes must be positive") }
        try quotas.validate()
        try webhook?.validate()
        try webPush?.validate()
        try apns?.validate()
        try eventHook?.validate(webhook: webhook)
        if let issuer, issuer.isEmpty { throw ConfigurationError("issuer must not be empty (omit it to accept any)") }
        if let audience, audience.isEmpty { throw ConfigurationError("audience must not be empty (omit it to accept any)") }
        guard fcm.maxSendsPerMinute >= 0 else { throw ConfigurationError("fcm.maxSendsPerMinute must be 0 (unpaced) or positive") }
        if let hms {
            guard hms.maxSendsPerSecond >= 0 else { throw ConfigurationError("hms.maxSendsPerSecond must be 0 (unpaced) or positive") }
            guard !hms.appId.isEmpty, !hms.clientId.isEmpty, !(hms.clientSecret.isEmpty && hms.clientSecretFile.isEmpty) else {
                throw ConfigurationError("hms needs appId, clientId and clientSecret (or clientSecretFile)")
            }
        }
    }

    enum CodingKeys: String, CodingKey {
        case enabled, fcmServiceAccountFile, fcm, subscriptionTTLSeconds, shadowMaxBytes, hms, authKeys, issuer, audience
        case encryption, rules, quotas
        case webhook, eventHook, webPush, apns
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        enabled = try c.decodeIfPresent(Bool.self, forKey: .enabled) ?? enabled
        fcmServiceAccountFile = try c.decodeIfPresent(String.self, forKey: .fcmServiceAccountFile) ?? fcmServiceAccountFile
        fcm = try c.decodeIfPresent(FCMSettings.self, forKey: .fcm) ?? fcm
        subscriptionTTLSeconds = try c.decodeIfPresent(Int64.self, forKey: .subscriptionTTLSeconds) ?? subscriptionTTLSeconds
        shadowMaxBytes = try c.decodeIfPresent(Int.self, forKey: .shadowMaxBytes) ?? shadowMaxBytes
        hms = try c.decodeIfPresent(HMSSettings.self, forKey: .hms)
        authKeys = try c.decodeIfPresent([DecodedJSON].self, forKey: .authKeys)?.map(\.value) ?? []
        issuer = try c.decodeIfPresent(String.self, forKey: .issuer)
        audience = try c.decodeIfPresent(String.self, forKey: .audience)
        encryption = try c.decodeIfPresent(DecodedJSON.self, forKey: .encryption)?.value
        rules = try c.decodeIfPresent(DecodedJSON.self, forKey: .rules)?.value
        quotas = try c.decodeIfPresent(AppQuotas.self, forKey: .quotas) ?? quotas
        webhook = try c.decodeIfPresent(WebhookSettings.self, forKey: .webhook)
        eventHook = try c.decodeIfPresent(EventHookSettings.self, forKey: .eventHook)
        webPush = try c.decodeIfPresent(WebPushSettings.self, forKey: .webPush)
        apns = try c.decodeIfPresent(APNsSettings.self, forKey: .apns)
    }
}

extension AppSettings.HMSSettings {
    enum CodingKeys: String, CodingKey { case appId, clientId, clientSecret, clientSecretFile, maxSendsPerSecond }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        appId = try c.decodeIfPresent(String.self, forKey: .appId) ?? ""
        clientId = try c.decodeIfPresent(String.self, forKey: .clientId) ?? ""
        clientSecret = try c.decodeIfPresent(String.self, forKey: .clientSecret) ?? ""
        clientSecretFile = try c.decodeIfPresent(String.self, forKey: .clientSecretFile) ?? ""
        maxSendsPerSecond = try c.decodeIfPresent(Int.self, forKey: .maxSendsPerSecond) ?? 0
    }
}
