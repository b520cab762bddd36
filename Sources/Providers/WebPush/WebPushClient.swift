import CurlHTTP
import PushCore
import SSLCrypto
import Synchronization
import WebPush

/// Delivers Web Push messages (RFC 8030) for one app: each notification encrypted for its browser (RFC 8291,
/// ``WebPushMessage``), signed for the push service's origin with the app's VAPID key (RFC 8292), and POSTed to the
/// subscription's endpoint: an outside URL, so it is checked as a webhook destination is. Its host is resolved just
/// before, every address it resolves to must be public (unless the app allows private endpoints), and the connection
/// is pinned to the address checked (no DNS rebinding between the check and the connection).
///
/// Outcomes (docs/DELIVERY.md): ``WebPushMessage/outcome(status:retryAfter:now:)``; a refused address is dropped
/// (`address_refused`, ``ProviderClassification/rejected``), timeouts, connection and resolution failures are
/// retried.
public struct WebPushClient: Sendable {
    public struct Settings: Sendable {
        public var allowPrivateEndpoints: Bool
        public var caFile: String?
        public var timeout: Duration
        /// Seconds a push service keeps a message for an offline browser, when the notification sets none.
        public var ttlSeconds: Int
        public var urgency: WebPushUrgency

        public init(
            allowPrivateEndpoints: Bool = false, caFile: String? = nil, timeout: Duration = .seconds(15), ttlSeconds: Int = 2_419_200,
            urgency: WebPushUrgency = .normal
        ) {
            self.allowPrivateEndpoints = allowPrivateEndpoints
            self.caFile = caFile
            self.timeout = timeout
            self.ttlSeconds = ttlSeconds
            self.urgency = urgency
        }
    }

    let http: HTTPClient
    let settings: Settings
    let resolver: HostResolver
    let clock: @Sendable () -> Double
    let authorizations: VAPIDAuthorizations
    let subscriptions = ReadSubscriptions()

    /// The app's VAPID key pair and contact (``VAPIDSigner``).
    public var vapid: VAPIDSigner { authorizations.signer }

    /// The host of the endpoint of the subscription stored as `token` (lowercased, as written), nil when it cannot be
    /// read: what a subscription's deliveries are gated by.
    public func host(ofSubscription token: String) -> String? { subscriptions.read(token)?.url.host }

    public init(
        http: HTTPClient, vapid: VAPIDSigner, settings: Settings, resolver: HostResolver = HostResolver(),
        clock: @escaping @Sendable () -> Double = { WallClock.now() }
    ) {
        self.http = http
        self.settings = settings
        self.resolver = resolver
        self.clock = clock
        self.authorizations = VAPIDAuthorizations(signer: vapid)
    }

    /// Sends `payload` to the browser subscription `subscription` (its stored form:
    /// ``PushCore/SubscriberKey/webPushToken(endpoint:p256dh:auth:)``) with `options` (a user notification's TTL and
    /// collapse key: the `Topic`); `submission` is marked when the request is handed to the HTTP client.
    public func send(
        subscription token: String, payload: [UInt8], options: DeliveryOptions = .none, submission: RequestSubmission? = nil
    ) async -> DeliveryOutcome {
        guard let read = subscriptions.read(token) else {
            return .failed(DeliveryFailure(reason: "invalid_subscription", classification: .rejected))
        }
        let address: IPAddress
        switch await OutsideEndpoint.address(of: read.url, resolver: resolver, allowPrivate: settings.allowPrivateEndpoints) {
        case .success(let checked): address = checked
        case .failure(let failure): return .failed(failure)
        }
        let request: HTTPRequest
        do {
            request = try WebPushMessage.request(
                payload, to: read.subscription, authorization: try authorizations.header(audience: read.audience, now: clock()),
                ttl: options.ttlSeconds ?? settings.ttlSeconds, urgency: settings.urgency,
                topic: options.collapseKey.map(WebPushMessage.topic(forCollapseKey:)), timeout: settings.timeout)
        } catch {
            // The payload is within 3993 bytes (the payload builder's limit for Web Push): only OpenSSL can fail here.
            return .failed(DeliveryFailure(reason: "encryption", classification: .ourFault))
        }
        let response: HTTPResponse
        switch await OutsideEndpoint.send(request, to: address, caFile: settings.caFile, http: http, submission: submission) {
        case .success(let answer): response = answer
        case .failure(let failure): return .failed(failure)
        }
        return WebPushMessage.outcome(status: response.status, retryAfter: response.header("retry-after"), now: clock())
    }
}

/// The browser subscriptions one app sent to lately, each read once (its endpoint checked, its origin, the browser's
/// key parsed: about a sixth of a message's cost when done per message). At most ``capacity``; when full it starts
/// over (a subscription read again costs that once more).
final class ReadSubscriptions: Sendable {
    struct Read: Sendable {
        let subscription: WebPushSubscription
        let url: WebhookURL
        /// The endpoint's origin: the VAPID token's `aud`.
        let audience: String
    }

    static let capacity = 4096
    private let entries = Mutex<[String: Read]>([:])

    /// The subscription stored as `token` (``PushCore/SubscriberKey/webPushToken(endpoint:p256dh:auth:)``), nil
    /// when it cannot be read.
    func read(_ token: String) -> Read? {
        if let known = entries.withLock({ $0[token] }) { return known }
        guard let parts = SubscriberKey.webPushParts(of: token),
            let subscription = try? WebPushSubscription(endpoint: String(parts.endpoint), p256dh: String(parts.p256dh), auth: String(parts.auth)),
            let url = try? WebhookURL(subscription.endpoint), let audience = VAPIDSigner.audience(ofEndpoint: subscription.endpoint)
        else { return nil }
        let read = Read(subscription: subscription, url: url, audience: audience)
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[token] = read
        }
        return read
    }
}

/// The `Authorization: vapid …` headers of one app, one per push service origin, each signed once and reused while
/// it has more than an hour to run (a signature is about 50 µs; a push service sees the same token for 11 hours).
final class VAPIDAuthorizations: Sendable {
    /// How long a signed token is valid (RFC 8292 allows at most 24 hours).
    static let lifetime: Double = 12 * 3600
    /// A token is replaced once it has less than this to run.
    static let renewBefore: Double = 3600

    let signer: VAPIDSigner
    private let cache = Mutex<[String: (header: String, expiresAt: Double)]>([:])

    init(signer: VAPIDSigner) { self.signer = signer }

    func header(audience: String, now: Double) throws -> String {
        if let cached = cache.withLock({ $0[audience] }), cached.expiresAt - now > Self.renewBefore { return cached.header }
        let expiresAt = (now + Self.lifetime).rounded(.down)
        let header = try signer.authorization(audience: audience, expiresAt: Int64(expiresAt))
        cache.withLock { $0[audience] = (header, expiresAt) }
        return header
    }
}
