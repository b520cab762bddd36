/// The identity of a subscription for retries: (app, path, subscriber). Notifications of one key are
/// delivered in order, one at a time.
public struct RetryKey: Sendable, Hashable {
    public let app: String
    public let path: DataPath
    public let subscriber: SubscriberKey
    /// The hash of the three, computed once: a key is hashed several times per notification (queue lines,
    /// stored lines, revocations), and hashing its bytes each time showed in profiles.
    private let hashCode: Int

    public init(app: String, path: DataPath, subscriber: SubscriberKey) {
        self.app = app
        self.path = path
        self.subscriber = subscriber
        var hasher = Hasher()
        app.hashBytes(into: &hasher)
        hasher.combine(path)
        hasher.combine(subscriber)
        hashCode = hasher.finalize()
    }

    /// By bytes, like every identity (``ExactString``).
    public static func == (left: RetryKey, right: RetryKey) -> Bool {
        left.hashCode == right.hashCode && left.app.bytesEqual(right.app) && left.path == right.path
            && left.subscriber == right.subscriber
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(hashCode)
    }
}

/// A notification waiting in the ``DeliveryQueue``: what to send, to whom, and its retry state.
///
/// `holds`, `payload`, `eventTime` and `fetchedAt` are transient (never stored in the state topic, ignored by `==`): `holds` are the
/// caller's opaque ids of what waits for this notification to be settled (e.g. the change event whose offset
/// may move only then), `payload` the bytes already built for it (nil: build them at send time).
public struct PendingNotification: Sendable, Equatable {
    /// The subscription (app, path, subscriber), with its hash computed once when the notification is made: the
    /// key is looked up several times on a notification's way (its line, its stored line, its revocation).
    public let key: RetryKey
    public var app: String { key.app }
    public var path: DataPath { key.path }
    public var subscriber: SubscriberKey { key.subscriber }
    public var format: NotificationFormat
    /// The device's own key (v2 `encryption`): the payload is encrypted for it, not for the app's key. Stored with
    /// the retries, so a revoke sent after its subscription is gone is still encrypted for the device.
    public var encryption: DeviceEncryption?
    public var content: NotificationContent
    /// The pause scope the notification belongs to, chosen by the caller (e.g. `"fcm:<project-id>"`): a
    /// project-wide pause (``DeliveryQueue/pause(scope:until:)``) holds back every notification of the scope.
    public var scope: String
    /// Opaque to the queue (e.g. the id of the change event that caused it), kept for logs. Coalescing keeps
    /// the latest one.
    public var origin: String
    /// When the notification first failed (seconds, injected clock). The 2-hour deadline counts from here.
    /// While `attempt == 0` it is only provisional: the first ``DeliveryQueue/failed(_:now:retryAfter:quotaExceeded:policy:random:)``
    /// sets it to that failure's time.
    public var firstFailureAt: Double
    /// Failed attempts so far (0: never tried, e.g. queued behind a subscription that backs off).
    public var attempt: Int
    /// Not to be sent before this time.
    public var notBefore: Double
    /// Transient: what waits for this notification (see the type's documentation).
    public var holds: [UInt64] = []
    /// Transient: the payload, when built before queueing.
    public var payload: [UInt8]?
    /// Transient: when the change event was written upstream (seconds since the epoch), for the end-to-end
    /// latency; nil when unknown.
    public var eventTime: Double?
    /// Transient: when the consumer's poll returned the record that caused it (monotonic nanoseconds,
    /// `DispatchTime.uptimeNanoseconds`), for the gateway's own latency; 0 when unknown (adopted lines, revokes).
    public var fetchedAt: UInt64 = 0

    public init(
        app: String, path: DataPath, subscriber: SubscriberKey, format: NotificationFormat,
        encryption: DeviceEncryption? = nil, content: NotificationContent, scope: String = "", origin: String = "",
        firstFailureAt: Double, attempt: Int = 0, notBefore: Double? = nil
    ) {
        self.key = RetryKey(app: app, path: path, subscriber: subscriber)
        self.format = format
        self.encryption = encryption
        self.content = content
        self.scope = scope
        self.origin = origin
        self.firstFailureAt = firstFailureAt
        self.attempt = attempt
        self.notBefore = notBefore ?? firstFailureAt
    }

    /// The stored fields only (`holds`, `payload`, `eventTime` and `fetchedAt` are transient).
    public static func == (left: PendingNotification, right: PendingNotification) -> Bool {
        left.key == right.key && left.format == right.format && left.encryption == right.encryption && left.content == right.content
            && left.scope.bytesEqual(right.scope) && left.origin == right.origin && left.firstFailureAt == right.firstFailureAt
            && left.attempt == right.attempt && left.notBefore == right.notBefore
    }

    /// True for `revoke` content (never coalesced: the last message of its subscription).
    public var isRevoke: Bool {
        if case .revoke = content { return true }
        return false
    }
}
