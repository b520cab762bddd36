import CompactJSON
import Foundation

/// The "console" settings of one app (SPEC §6), as written in the main configuration's `apps` section or in
/// one file per app in the settings directory (docs/CONFIGURATION.md). Absent fields keep their defaults.
public struct AppSettings: Decodable, Sendable, Equatable {
    /// False: the API answers 403 `disabled` and every subscription is revoked with `disabled`.
    public var enabled = true
    /// Firebase service-account JSON file; empty: notifications go to the console sink.
    public var fcmServiceAccountFile = ""
    /// Default and maximum lifetime of a subscription.
    public var subscriptionTTLSeconds: Int64 = 30 * 24 * 3600
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

    public init() {}

    /// The secret of the embedded default app `demo` (its v2 API needs tokens; the start-up banner prints one).
    /// Only served with the embedded defaults (``GatewayConfiguration/servesDemoApp``): never a production secret.
    public static let demoSecret = "demo-secret-for-the-embedded-defaults-only"

    /// The embedded default app: console sink, HS256 tokens signed with ``demoSecret``.
    public static var demo: AppSettings {
        var settings = AppSettings()
        settings.authKeys = [.object(["alg": .string("HS256"), "kid": .string("demo"), "secret": .string(demoSecret)])]
        return settings
    }

    public struct HMSSettings: Decodable, Sendable, Equatable {
        public var appId = ""
        public var clientId = ""
        public var clientSecret = ""
        public var clientSecretFile = ""
    }

    func validate() throws(ConfigurationError) {
        guard subscriptionTTLSeconds > 0 else { throw ConfigurationError("subscriptionTTLSeconds must be positive") }
        guard shadowMaxBytes > 0 else { throw ConfigurationError("shadowMaxBytes must be positive") }
        try quotas.validate()
        if let issuer, issuer.isEmpty { throw ConfigurationError("issuer must not be empty (omit it to accept any)") }
        if let audience, audience.isEmpty { throw ConfigurationError("audience must not be empty (omit it to accept any)") }
        if let hms {
            guard !hms.appId.isEmpty, !hms.clientId.isEmpty, !(hms.clientSecret.isEmpty && hms.clientSecretFile.isEmpty) else {
                throw ConfigurationError("hms needs appId, clientId and clientSecret (or clientSecretFile)")
            }
        }
    }

    enum CodingKeys: String, CodingKey {
        case enabled, fcmServiceAccountFile, subscriptionTTLSeconds, shadowMaxBytes, hms, authKeys, issuer, audience
        case encryption, rules, quotas
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        enabled = try c.decodeIfPresent(Bool.self, forKey: .enabled) ?? enabled
        fcmServiceAccountFile = try c.decodeIfPresent(String.self, forKey: .fcmServiceAccountFile) ?? fcmServiceAccountFile
        subscriptionTTLSeconds = try c.decodeIfPresent(Int64.self, forKey: .subscriptionTTLSeconds) ?? subscriptionTTLSeconds
        shadowMaxBytes = try c.decodeIfPresent(Int.self, forKey: .shadowMaxBytes) ?? shadowMaxBytes
        hms = try c.decodeIfPresent(HMSSettings.self, forKey: .hms)
        authKeys = try c.decodeIfPresent([DecodedJSON].self, forKey: .authKeys)?.map(\.value) ?? []
        issuer = try c.decodeIfPresent(String.self, forKey: .issuer)
        audience = try c.decodeIfPresent(String.self, forKey: .audience)
        encryption = try c.decodeIfPresent(DecodedJSON.self, forKey: .encryption)?.value
        rules = try c.decodeIfPresent(DecodedJSON.self, forKey: .rules)?.value
        quotas = try c.decodeIfPresent(AppQuotas.self, forKey: .quotas) ?? quotas
    }
}

extension AppSettings.HMSSettings {
    enum CodingKeys: String, CodingKey { case appId, clientId, clientSecret, clientSecretFile }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        appId = try c.decodeIfPresent(String.self, forKey: .appId) ?? ""
        clientId = try c.decodeIfPresent(String.self, forKey: .clientId) ?? ""
        clientSecret = try c.decodeIfPresent(String.self, forKey: .clientSecret) ?? ""
        clientSecretFile = try c.decodeIfPresent(String.self, forKey: .clientSecretFile) ?? ""
    }
}

/// Where per-app settings files are read from, and how often they are re-read.
public struct AppSettingsSource: Decodable, Sendable, Equatable {
    /// A directory of `<app>.yaml` / `<app>.yml` / `<app>.json` files (a mounted ConfigMap/Secret); empty: none.
    public var directory = ""
    public var reloadSeconds = 5.0

    public init() {}

    enum CodingKeys: String, CodingKey { case directory, reloadSeconds }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        directory = try c.decodeIfPresent(String.self, forKey: .directory) ?? ""
        reloadSeconds = try c.decodeIfPresent(Double.self, forKey: .reloadSeconds) ?? 5
    }
}

/// Any YAML/JSON value, decoded into the project's ``JSONValue`` (for the settings that other modules parse:
/// keys, rules).
struct DecodedJSON: Decodable {
    let value: JSONValue

    init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: AnyKey.self) {
            var object: [ExactString: JSONValue] = [:]
            for key in keyed.allKeys { object[ExactString(key.stringValue)] = try keyed.decode(DecodedJSON.self, forKey: key).value }
            value = .object(object)
            return
        }
        if var unkeyed = try? decoder.unkeyedContainer() {
            var array: [JSONValue] = []
            while !unkeyed.isAtEnd { array.append(try unkeyed.decode(DecodedJSON.self).value) }
            value = .array(array)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            value = .null
        } else if let bool = try? single.decode(Bool.self) {
            value = .bool(bool)
        } else if let int = try? single.decode(Int64.self) {
            value = .number(String(int))
        } else if let double = try? single.decode(Double.self), double.isFinite {
            value = .number(String(double))
        } else {
            value = .string(try single.decode(String.self))
        }
    }

    struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
