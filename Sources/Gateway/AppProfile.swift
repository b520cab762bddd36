import Auth
import CurlHTTP
import Foundation
import JOSE
import Logging
import Providers
import PushCore
import PushFormats
import Rules
import SSLCrypto

/// One app's settings, checked and compiled: the token verifier, the read rules, the encryption keys and the
/// senders. Immutable; a reload builds a new profile and swaps it in (``AppState``), so a request or an event
/// sees one consistent version.
public final class AppProfile: Sendable {
    public let name: String
    public let settings: AppSettings
    /// Nil when the app has no auth keys: then no token can be verified (v1 `token` is refused, v2 is 401).
    let verifier: JWTVerifier?
    let rules: ReadRules
    /// Changes whenever the rules document changes: the revocation sweep re-checks subscriptions then.
    let rulesFingerprint: String
    let encryption: AppEncryptionKeys?
    let senders: [SubscriberKind: any PushSender]
    /// SHA-256 of the FCM service account file, to keep the FCM client (and its cached token) across reloads.
    let fcmAccountFingerprint: String?
    /// Of the HMS credentials, to keep the HMS client (and its token) across reloads.
    let hmsFingerprint: String?
    /// Where the app's event hook is sent (``EventHookService``); nil without `eventHook` settings.
    let eventHook: EventHookTarget?
    /// Requests in flight per provider project (`fcm.maxInFlightPerProject`): a queue admission (``admissions(for:)``).
    let maxInFlightPerProject: Int
    /// What a notification through each provider kind needs (``admissions(for:)``), made once: the profile is
    /// immutable, and the queue asks at every hand-out.
    private let providerAdmissions: [SubscriberKind: [DeliveryQueue.Admission]]
    /// The provider project of each provider kind (``admissionScope(for:)``), made once: a sender's `project` is
    /// built on each call, and the lane of every notification is chosen by it.
    private let providerScopes: [SubscriberKind: String]

    init(
        name: String, settings: AppSettings, verifier: JWTVerifier?, rules: ReadRules, rulesFingerprint: String,
        encryption: AppEncryptionKeys?, senders: [SubscriberKind: any PushSender], fcmAccountFingerprint: String?,
        hmsFingerprint: String? = nil, eventHook: EventHookTarget? = nil, maxInFlightPerProject: Int = 200
    ) {
        self.maxInFlightPerProject = max(1, maxInFlightPerProject)
        self.hmsFingerprint = hmsFingerprint
        self.eventHook = eventHook
        self.name = name
        self.settings = settings
        self.verifier = verifier
        self.rules = rules
        self.rulesFingerprint = rulesFingerprint
        self.encryption = encryption
        self.senders = senders
        self.fcmAccountFingerprint = fcmAccountFingerprint
        var providerAdmissions: [SubscriberKind: [DeliveryQueue.Admission]] = [:]
        var providerScopes: [SubscriberKind: String] = [:]
        for kind in SubscriberKind.allCases {
            guard let sender = Self.providerSender(for: kind, in: senders) else { continue }
            let project = sender.project
            let inFlight = DeliveryQueue.Admission.concurrency(DeliveryQueue.Gate(key: project, limit: self.maxInFlightPerProject))
            providerAdmissions[kind] = Self.pace(for: kind, sender: sender, settings: settings).map { [.rate($0), inFlight] } ?? [inFlight]
            providerScopes[kind] = project
        }
        self.providerAdmissions = providerAdmissions
        self.providerScopes = providerScopes
    }

    var enabled: Bool { settings.enabled }

    func sender(for kind: SubscriberKind) -> (any PushSender)? { senders[kind] }

    /// The pace of the provider project a notification to `kind` goes through (its send quota), nil when
    /// unpaced (the console sink, webhooks, a quota of 0).
    func pace(for kind: SubscriberKind) -> DeliveryQueue.Pace? {
        providerSender(for: kind).flatMap { Self.pace(for: kind, sender: $0, settings: settings) }
    }

    private static func pace(for kind: SubscriberKind, sender: any PushSender, settings: AppSettings) -> DeliveryQueue.Pace? {
        switch kind {
        case .mobile:
            return DeliveryQueue.Pace.quota(key: sender.project, sends: settings.fcm.maxSendsPerMinute, per: 60)
        case .huawei:
            return DeliveryQueue.Pace.quota(key: sender.project, sends: settings.hms?.maxSendsPerSecond ?? 0, per: 1)
        default:
            return nil
        }
    }

    /// What a notification to `subscriber` needs before the delivery queue hands it out
    /// (``DeliveryQueue/Admission``), all together: through FCM or HMS, its provider project's send rate (when
    /// paced) and a place of the project's `maxInFlightPerProject` requests in flight; a webhook, a place of its
    /// destination host's `maxInFlightPerHost` (``WebhookSender/gate(token:)``); a Web Push subscription, a place of
    /// its push service host's (``WebPushSender/gate(token:)``); nothing otherwise (the console sink).
    func admissions(for subscriber: SubscriberKey) -> [DeliveryQueue.Admission] {
        if subscriber.kind == .webhook {
            guard let webhook = senders[.webhook] as? WebhookSender else { return [] }
            return [.concurrency(webhook.gate(token: subscriber.token))]
        }
        if subscriber.kind == .webpush {
            guard let webPush = senders[.webpush] as? WebPushSender else { return [] }
            return [.concurrency(webPush.gate(token: subscriber.token))]
        }
        return providerAdmissions[subscriber.kind] ?? []
    }

    /// The scope whose admissions a notification to `kind` is counted in: its provider project (`fcm:<id>`,
    /// `hms:<id>`: in-flight limit and pace, shared by every app sending through it), else the app (its webhook
    /// hosts' gates, the console sink). The delivery service keeps each such scope in one lane
    /// (``DeliveryService``), so that project-wide limits are counted in one place.
    func admissionScope(for kind: SubscriberKind) -> String { providerScopes[kind] ?? name }

    /// Every admission scope `app`'s notifications can be counted in, `profile` being its settings (nil: none): the
    /// app itself, and the project of each provider it sends through (``admissionScope(for:)``), each once.
    static func admissionScopes(ofApp app: String, profile: AppProfile?) -> Set<String> {
        Set([app] + SubscriberKind.allCases.compactMap { profile?.admissionScope(for: $0) })
    }

    /// The admission scope of `key`'s line, `profile` being its app's settings: ``admissionScope(for:)``, or the app
    /// when it has no settings (its notifications then wait for them, counted in no project). It chooses the line's
    /// lane (``DeliveryService``) and names the pause a project's quota sets (``DeliveryLane``).
    static func admissionScope(of key: RetryKey, profile: AppProfile?) -> String {
        profile?.admissionScope(for: key.subscriber.kind) ?? key.app
    }

    /// The sender of `kind` when it is a provider's (FCM for `.mobile`, HMS for `.huawei`, APNs for `.apns`), not the
    /// console sink.
    private func providerSender(for kind: SubscriberKind) -> (any PushSender)? { Self.providerSender(for: kind, in: senders) }

    private static func providerSender(for kind: SubscriberKind, in senders: [SubscriberKind: any PushSender]) -> (any PushSender)? {
        guard let sender = senders[kind] else { return nil }
        switch kind {
        case .mobile where sender.provider == "fcm", .huawei where sender.provider == "hms", .apns where sender.provider == "apns": return sender
        default: return nil
        }
    }

    var usesConsole: Bool { senders[.mobile] is ConsoleSink }
}

/// An app's event hook, compiled: its URL, its queue's bound, and the app's webhook client (signing secrets,
/// address checks, timeout, CA file).
struct EventHookTarget: Sendable {
    let url: String
    let maxQueuedEvents: Int
    let client: WebhookClient
}
