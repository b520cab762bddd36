import Auth
import CurlHTTP
import Foundation
import GatewayLogging
import JOSE
import Logging
import Providers
import PushCore
import PushFormats
import Rules
import SSLCrypto

/// Builds ``AppProfile``s from settings: parses keys and rules, loads credentials, creates provider clients
/// (reusing the previous profile's FCM client when its service account did not change).
public struct AppProfileBuilder: Sendable {
    /// Nil in tests: apps with an FCM service account are then refused.
    let httpClient: HTTPClient?
    let fcm: FCMConfiguration
    let hms: HMSConfiguration
    /// Where APNs is (``GatewayConfiguration/APNs``).
    public var apns = APNsConfiguration()
    /// Requests in flight per provider project (a delivery queue admission: ``AppProfile/admissions(for:)``).
    let maxInFlightPerProject: Int
    /// ``GatewayConfiguration/allowInsecureEndpoints``: a service account's `http://` `token_uri` is refused without it.
    let allowInsecureEndpoints: Bool
    /// The sender of an app (or a kind of subscriber) without provider credentials: ``ConsoleSink``.
    let consoleSink: @Sendable (_ app: String) -> any PushSender
    let logger: Logger
    /// The client of webhook deliveries, apart from the providers' so that slow receivers never hold their
    /// requests' places. Nil (tests): webhook subscriptions are delivered to the console sink.
    public var webhookHTTPClient: HTTPClient? = nil

    public init(
        httpClient: HTTPClient?, fcm: FCMConfiguration, hms: HMSConfiguration = HMSConfiguration(),
        maxInFlightPerProject: Int = 200, allowInsecureEndpoints: Bool = false,
        consoleSink: @escaping @Sendable (_ app: String) -> any PushSender = { ConsoleSink(app: $0) }, logger: Logger
    ) {
        self.httpClient = httpClient
        self.consoleSink = consoleSink
        self.allowInsecureEndpoints = allowInsecureEndpoints
        self.maxInFlightPerProject = maxInFlightPerProject
        self.fcm = fcm
        self.hms = hms
        self.logger = logger
    }

    /// The profile of app `name`, compiled from `settings`; `previous`'s provider clients (and their cached tokens)
    /// are kept when their credentials did not change. `push-gateway check-credentials` compiles with it too.
    public func build(name: String, settings: AppSettings, previous: AppProfile?) throws(ConfigurationError) -> AppProfile {
        try settings.validate()
        var keys: [AuthKey] = []
        for (position, entry) in settings.authKeys.enumerated() {
            do {
                keys.append(try AuthKey.parse(entry))
            } catch {
                throw ConfigurationError("authKeys[\(position)]: \(error)")
            }
        }
        let rules: ReadRules
        var rulesFingerprint = ""
        if let document = settings.rules {
            do {
                rules = try ReadRules(document: document)
            } catch {
                throw ConfigurationError("rules: \(error)")
            }
            rulesFingerprint = Self.fingerprint(JSONWriter.bytes(document))
        } else {
            rules = ReadRules.allowAll
        }
        var encryption: AppEncryptionKeys?
        if let document = settings.encryption {
            do {
                encryption = try AppEncryptionKeys.parse(document)
            } catch {
                throw ConfigurationError("encryption: \(error)")
            }
        }
        var senders: [SubscriberKind: any PushSender] = [:]
        var accountFingerprint: String?
        var hmsFingerprint: String?
        if settings.fcmServiceAccountFile.isEmpty {
            senders[.mobile] = consoleSink(name)
        } else {
            let bytes: [UInt8]
            do {
                bytes = Array(try Data(contentsOf: URL(fileURLWithPath: settings.fcmServiceAccountFile)))
            } catch {
                throw ConfigurationError("fcmServiceAccountFile \(settings.fcmServiceAccountFile): cannot read it (\(error.localizedDescription))")
            }
            let fingerprint = Self.fingerprint(bytes)
            accountFingerprint = fingerprint
            if let previous, previous.fcmAccountFingerprint == fingerprint, let sender = previous.senders[.mobile] {
                senders[.mobile] = sender
            } else {
                guard let httpClient else { throw ConfigurationError("fcmServiceAccountFile: no HTTP client") }
                do {
                    let account = try FCMServiceAccount(json: bytes)
                    if fcm.tokenURL == nil {
                        // The account's token endpoint receives a signed assertion: https only (see
                        // GatewayConfiguration.validateEndpoints for the configured ones).
                        try GatewayConfiguration.checkEndpoint(
                            account.tokenURI, name: "the service account's token_uri", allowInsecure: allowInsecureEndpoints)
                    }
                    let client = try FCMClient(serviceAccount: account, httpClient: httpClient, configuration: fcm, logger: logger)
                    senders[.mobile] = FCMSender(client: client)
                } catch {
                    throw ConfigurationError("fcmServiceAccountFile \(settings.fcmServiceAccountFile): \(error)")
                }
            }
        }
        if let hms = settings.hms {
            guard let httpClient else { throw ConfigurationError("hms: no HTTP client") }
            let secret = try hms.secret()
            let credentials = HMSCredentials(appId: hms.appId, clientId: hms.clientId, clientSecret: secret)
            let fingerprint = Self.fingerprint(Array("\(hms.appId)\u{0}\(hms.clientId)\u{0}\(secret)".utf8))
            if let previous, previous.hmsFingerprint == fingerprint, let sender = previous.senders[.huawei] {
                senders[.huawei] = sender
            } else {
                do {
                    senders[.huawei] = HMSSender(
                        client: try HMSClient(credentials: credentials, httpClient: httpClient, configuration: self.hms, logger: logger))
                } catch {
                    throw ConfigurationError("hms: \(error)")
                }
            }
            hmsFingerprint = fingerprint
        } else {
            senders[.huawei] = consoleSink(name)
        }
        let webhookClient = try webhookClient(settings: settings)
        if let webhook = settings.webhook, !webhook.secrets.isEmpty {
            // The console sink without an HTTP client (tests).
            senders[.webhook] =
                webhookClient.map { WebhookSender(app: name, client: $0, maxInFlightPerHost: webhook.maxInFlightPerHost) } ?? consoleSink(name)
        }
        if let webPush = settings.webPush {
            let signer = try webPush.signer()
            // The webhook client's HTTP client: push services are outside endpoints too. The console sink without one (tests).
            senders[.webpush] =
                webhookHTTPClient.map {
                    WebPushSender(
                        app: name, client: WebPushClient(http: $0, vapid: signer, settings: webPush.clientSettings),
                        maxInFlightPerHost: webPush.maxInFlightPerHost)
                } ?? consoleSink(name)
        }
        if let apns = settings.apns {
            senders[.apns] = try apnsSender(app: name, settings: apns, previous: previous)
        }
        let eventHook = settings.eventHook.flatMap { hook in
            webhookClient.map { EventHookTarget(url: hook.url, maxQueuedEvents: hook.maxQueuedEvents, client: $0) }
        }
        Self.warnAboutUnboundKeys(app: name, keys: keys, settings: settings, logger: logger)
        let verifier =
            keys.isEmpty ? nil : JWTVerifier(keys: keys, issuer: settings.issuer, audience: settings.audience)
        return AppProfile(
            name: name, settings: settings, verifier: verifier, rules: rules,
            rulesFingerprint: rulesFingerprint, encryption: encryption, senders: senders,
            fcmAccountFingerprint: accountFingerprint, hmsFingerprint: hmsFingerprint, eventHook: eventHook,
            maxInFlightPerProject: maxInFlightPerProject)
    }

    /// The sender of the app's APNs subscriptions: `previous`'s when the credentials did not change (its provider
    /// token is kept: Apple refuses a team's new token within 20 minutes of the last), else a new one; the console
    /// sink without an HTTP client (tests).
    func apnsSender(app: String, settings: APNsSettings, previous: AppProfile?) throws(ConfigurationError) -> any PushSender {
        let key = try settings.key()
        let fingerprint: String
        do {
            fingerprint = try settings.fingerprint(key: key)
        } catch {
            throw ConfigurationError("apns.keyFile \(settings.keyFile): \(error)")
        }
        if let kept = previous?.senders[.apns] as? APNsSender, kept.fingerprint == fingerprint { return kept }
        guard let httpClient else { return consoleSink(app) }
        let token = APNsProviderToken(teamID: settings.teamId, keyID: settings.keyId, key: key, clock: { WallClock.now() })
        let client = APNsClient(
            http: httpClient, providerToken: token, bundleID: settings.bundleId,
            environment: APNsClient.Environment(rawValue: settings.environment) ?? .production, configuration: apns, logger: logger)
        return APNsSender(client: client, fingerprint: fingerprint)
    }

    /// The app's webhook client (its `webhook:` settings, secrets checked), shared by its webhook subscriptions and
    /// its event hook; nil when the app has no webhook secret (its webhook subscriptions are refused) or without an
    /// HTTP client (tests).
    func webhookClient(settings: AppSettings) throws(ConfigurationError) -> WebhookClient? {
        guard let webhook = settings.webhook, !webhook.secrets.isEmpty else { return nil }
        let signer: WebhookSigner
        do {
            signer = try WebhookSigner(secrets: webhook.secrets)
        } catch {
            throw ConfigurationError("webhook.secrets: \(error.description)")
        }
        guard let webhookHTTPClient else { return nil }
        return WebhookClient(
            http: webhookHTTPClient, signer: signer,
            settings: WebhookClient.Settings(
                allowPrivateDestinations: webhook.allowPrivateDestinations, caFile: webhook.caFile.isEmpty ? nil : webhook.caFile,
                timeout: .milliseconds(webhook.timeoutMs)))
    }

    /// An RS256/ES256 key is often an identity provider's, shared by all its tenants: without `issuer` and
    /// `audience`, a token minted for another project of the same provider would be accepted.
    static func warnAboutUnboundKeys(app: String, keys: [AuthKey], settings: AppSettings, logger: Logger) {
        guard keys.contains(where: { $0.algorithm != .hs256 }) else { return }
        let missing = [settings.issuer == nil ? "issuer" : nil, settings.audience == nil ? "audience" : nil].compactMap { $0 }
        guard !missing.isEmpty else { return }
        logger.warning(
            "app accepts RS256/ES256 tokens without checking \(missing.joined(separator: " and ")): a key shared across tenants (an identity provider's) would accept tokens minted for another project; set them in the app settings",
            metadata: [LoggingKeys.app: "\(app)", LoggingKeys.missing: "\(missing.joined(separator: ","))"])
    }

    static func fingerprint(_ bytes: [UInt8]) -> String {
        Base64URL.encode(SHA256.hash(bytes))
    }
}
