/// What a notification carries (seed 000): `noData` (the default), `value`, `childEvent`.
public enum SubscriptionMode: String, Sendable, CaseIterable {
    case noData
    case value
    case childEvent

    /// Modes that need the data at the subscribed node (a shadow).
    public var needsData: Bool { self != .noData }
}

/// The push provider a subscriber is reached through.
public enum SubscriberKind: String, Sendable, CaseIterable {
    /// Firebase Cloud Messaging (Android, and iOS through FCM's APNs relay).
    case mobile
    /// Huawei Push Kit.
    case huawei
    /// An HTTPS endpoint of the app's backend: Standard Webhooks-signed POSTs (``SubscriberKey/webhook(destination:context:uid:)``).
    case webhook
    /// A browser's Web Push subscription (RFC 8030): the push service's endpoint and the browser's keys
    /// (``SubscriberKey/webPush(endpoint:p256dh:auth:uid:)``).
    case webpush
    /// An Apple device reached through APNs directly (token-based authentication): the token is the device token in
    /// lowercase hex.
    case apns

    /// The largest data document a notification to this kind carries: 4093 bytes (seed 000) for FCM and HMS; for Web
    /// Push 3993, what an encrypted record of at most 4096 bytes holds (RFC 8291: 4096 less the 86-byte header, the
    /// 16-byte tag and the delimiter); for APNs 4057, what its 4096-byte payload holds around
    /// `{"aps":{"content-available":1},"data":…}`. Webhooks send their own body (the app's `webhook.maxBodyBytes`).
    public var maximumPayloadSize: Int {
        switch self {
        case .webpush: return 3993
        case .apns: return 4057
        case .mobile, .huawei, .webhook: return DataPayload.maximumSize
        }
    }
}

/// The data-payload format a subscriber receives.
public enum NotificationFormat: String, Sendable, CaseIterable {
    case v1
    case v2
}

/// Who is subscribed at a node: the identity of a subscription within its (app, path).
/// v1 identity is (app, path, device id): `uid` is nil. v2 identity adds the user id.
///
/// Equality and hashing compare the token's and the uid's UTF-8 bytes (``ExactString``), never Unicode
/// canonical equivalence: two tokens or uids that differ in bytes are two identities.
public struct SubscriberKey: Sendable, Hashable {
    // The kind and token in one reference and the uid in another keep the struct at 16 bytes: a million of them
    // are held in memory.
    /// The destination (kind and push token) as stored: shared by every subscription of the device (``AppIndex``).
    public var packedToken: PackedToken
    /// The uid as stored (nil: none, v1): shared by every subscription of the user (``AppIndex``).
    public var packedUID: PackedToken?

    /// The provider (or webhook, browser) this subscriber is reached through.
    public var kind: SubscriberKind {
        get { packedToken.kind }
        set { packedToken = PackedToken.make(packedToken.string, kind: newValue) }
    }

    /// The provider's push token (FCM registration token, HMS push token); made from ``packedToken`` on each read.
    public var token: String {
        get { packedToken.string }
        set { packedToken = PackedToken.make(newValue, kind: packedToken.kind) }
    }

    /// The v2 user id; nil for v1 (an empty uid is none). Made from ``packedUID`` on each read.
    public var uid: String? {
        get { packedUID?.string }
        set { packedUID = Self.packedUID(newValue) }
    }

    public init(kind: SubscriberKind = .mobile, token: String, uid: String? = nil) {
        self.init(packedToken: PackedToken.make(token, kind: kind), uid: uid)
    }

    /// The subscriber of the destination `packedToken` (its kind and token).
    public init(packedToken: PackedToken, uid: String? = nil) {
        self.packedToken = packedToken
        self.packedUID = Self.packedUID(uid)
    }

    /// A uid as ``packedUID`` holds it: nil for none or empty.
    static func packedUID(_ uid: String?) -> PackedToken? {
        guard let uid, !uid.isEmpty else { return nil }
        return PackedToken.make(uid)
    }

    /// A `webhook` subscriber: `token` holds the destination URL and the free-text context, separated by a
    /// line feed (a destination never holds one), so the 6-tuple needs no field more per subscription.
    public static func webhook(destination: String, context: String, uid: String?) -> SubscriberKey {
        SubscriberKey(kind: .webhook, token: destination + "\n" + context, uid: uid)
    }

    /// A `webpush` subscriber: `token` holds the endpoint URL, the browser's `p256dh` key and its `auth` secret (both
    /// base64url, as the browser gave them), separated by line feeds (none of them holds one). The three are the
    /// subscription's `context`: one browser subscription, one device.
    public static func webPush(endpoint: String, p256dh: String, auth: String, uid: String?) -> SubscriberKey {
        SubscriberKey(kind: .webpush, token: webPushToken(endpoint: endpoint, p256dh: p256dh, auth: auth), uid: uid)
    }

    /// The stored form of a browser's subscription (``webPush(endpoint:p256dh:auth:uid:)``).
    public static func webPushToken(endpoint: String, p256dh: String, auth: String) -> String {
        endpoint + "\n" + p256dh + "\n" + auth
    }

    /// A `webpush` subscriber's endpoint and keys; nil for the other kinds.
    public var webPushParts: (endpoint: Substring, p256dh: Substring, auth: Substring)? {
        guard kind == .webpush else { return nil }
        return Self.webPushParts(of: token)
    }

    /// The endpoint and keys of a stored browser subscription (``webPushToken(endpoint:p256dh:auth:)``).
    public static func webPushParts(of token: String) -> (endpoint: Substring, p256dh: Substring, auth: Substring)? {
        let parts = token.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        return (parts[0], parts[1], parts[2])
    }

    /// The v2 `destination`: the webhook URL; empty for the other kinds.
    public var destination: Substring { destinationAndContext.destination }

    /// The v2 `context`: the push token, or a webhook's free text.
    public var context: Substring { destinationAndContext.context }

    /// ``destination`` and ``context`` from one read of the token (each read unpacks it).
    public var destinationAndContext: (destination: Substring, context: Substring) {
        let token = self.token
        guard kind == .webhook, let newline = token.utf8.firstIndex(of: 0x0A) else { return ("", token[...]) }
        return (token[..<newline], token[token.utf8.index(after: newline)...])
    }

    /// The device this subscriber reaches (kind and token), whatever the user.
    public var device: DeviceKey { DeviceKey(packedToken: packedToken) }

    public static func == (left: SubscriberKey, right: SubscriberKey) -> Bool {
        left.packedToken == right.packedToken && left.packedUID == right.packedUID
    }

    public func hash(into hasher: inout Hasher) {
        packedToken.hash(into: &hasher)
        hasher.combine(packedUID)
    }
}

/// A push destination: the provider and the token, compared by bytes (the per-device quota counts by it).
public struct DeviceKey: Sendable, Hashable {
    /// The kind and the token, as stored.
    public var packedToken: PackedToken

    public var kind: SubscriberKind { packedToken.kind }
    public var token: ExactString { ExactString(packedToken.string) }

    public init(kind: SubscriberKind, token: ExactString) {
        self.init(packedToken: PackedToken.make(token.string, kind: kind))
    }

    public init(packedToken: PackedToken) {
        self.packedToken = packedToken
    }
}

/// The mutable part of a subscription.
public struct SubscriptionSettings: Sendable, Equatable {
    // Field order: the one-byte fields last, so the struct is 26 bytes and the fields that follow it in a
    // payload (AppIndex) fit in its tail.
    /// The uid of the auth token the subscription was made with (nil without a token), so that the app's
    /// read rules can be re-checked when they change. For v2 it equals the subscriber's uid. Made from
    /// ``packedAuthUID`` on each read.
    public var authUID: String? {
        get { packedAuthUID?.string }
        set { packedAuthUID = newValue.map { PackedToken.make($0) } }
    }
    /// ``authUID`` as stored: shared by every subscription of the uid (``AppIndex``), 8 bytes instead of a string's
    /// 16 in every subscriber entry (issue 19).
    var packedAuthUID: PackedToken?
    /// The filters and the device key, both rare, in one box: one pointer in every subscriber entry (issue 19),
    /// their storage only where there are some.
    private var extras: Extras?

    /// What narrows the writes that wake this subscription (v2 only); nil: every write. Empty filters are
    /// stored as nil.
    public var filters: SubscriptionFilters? {
        get { extras?.filters }
        set { extras = Extras.make(filters: newValue, encryption: encryption) }
    }

    /// v2 only: the device's own public key; its notifications are encrypted for it alone. Nil: the app's key
    /// (or none) decides, as for every other subscription.
    public var encryption: DeviceEncryption? {
        get { extras?.encryption }
        set { extras = Extras.make(filters: filters, encryption: newValue) }
    }

    /// Expiry, seconds since the Unix epoch.
    public var expiresAt: Int64
    public var mode: SubscriptionMode
    public var format: NotificationFormat

    public init(
        mode: SubscriptionMode, format: NotificationFormat = .v1, expiresAt: Int64, authUID: String? = nil,
        filters: SubscriptionFilters? = nil, encryption: DeviceEncryption? = nil
    ) {
        self.expiresAt = expiresAt
        self.mode = mode
        self.format = format
        self.packedAuthUID = authUID.map { PackedToken.make($0) }
        self.extras = Extras.make(filters: filters, encryption: encryption)
    }

    /// The uid a quota counts this subscription against: the auth token's uid (v2: the subscriber's uid).
    public var owner: ExactString? { authUID.map { ExactString($0) } }

    public static func == (left: SubscriptionSettings, right: SubscriptionSettings) -> Bool {
        left.expiresAt == right.expiresAt && left.mode == right.mode && left.format == right.format
            && left.packedAuthUID == right.packedAuthUID
            && left.filters == right.filters && left.encryption == right.encryption
    }

    /// The estimated heap bytes of the box that holds the filters and the device key, and of the filters (the
    /// key array and the keys' strings): what ``AppIndex/byteCount`` adds for a filtered or device-keyed
    /// subscription, besides the device key's own object (``DeviceEncryption/heapBytes``).
    var extraBytes: Int {
        guard let extras else { return 0 }
        var total = HeapCost.object(fields: MemoryLayout<(SubscriptionFilters?, DeviceEncryption?)>.size)
        if let keys = extras.filters?.keys {
            total += HeapCost.array(capacity: keys.capacity, stride: MemoryLayout<ExactString>.stride)
            for key in keys { total += HeapCost.string(key.string) }
        }
        return total
    }
}

/// The immutable storage of a subscription's filters and device key (nil when it has neither).
private final class Extras: Sendable {
    let filters: SubscriptionFilters?
    let encryption: DeviceEncryption?

    private init(filters: SubscriptionFilters?, encryption: DeviceEncryption?) {
        self.filters = filters
        self.encryption = encryption
    }

    /// Nil when there is nothing to hold; empty filters are stored as none.
    static func make(filters: SubscriptionFilters?, encryption: DeviceEncryption?) -> Extras? {
        let filters = filters.flatMap { $0.isEmpty ? nil : $0 }
        return filters == nil && encryption == nil ? nil : Extras(filters: filters, encryption: encryption)
    }
}

/// One subscription, as returned by queries on the index.
public struct Subscription: Sendable, Equatable {
    public var path: DataPath
    public var subscriber: SubscriberKey
    public var settings: SubscriptionSettings

    public init(path: DataPath, subscriber: SubscriberKey, settings: SubscriptionSettings) {
        self.path = path
        self.subscriber = subscriber
        self.settings = settings
    }
}

/// Why a subscription was revoked (seed 000's status codes).
public enum RevocationReason: String, Sendable, CaseIterable {
    case permissionDenied = "permission_denied"
    case namespaceDoesNotExist = "namespace_does_not_exist"
    case disabled
    case expired
    case tooBig = "too_big"
}
