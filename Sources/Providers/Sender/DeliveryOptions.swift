/// How a provider may hold or replace one message: what the publisher of a user notification asked for
/// (`ttl_seconds`, `collapse_key`; docs/PAYLOADS.md). Change events have none (``none``): the providers'
/// defaults apply and the request bodies are those of ``FCMMessageEncoder`` and ``HMSMessageEncoder`` without them.
public struct DeliveryOptions: Sendable, Equatable {
    /// How long the provider may keep the message for a device that is offline (seconds; 0: now or never).
    /// nil: the provider's default (4 weeks for FCM, 1 day for HMS).
    public var ttlSeconds: Int?
    /// Messages with the same key replace each other while they wait at the provider; nil: none.
    public var collapseKey: String?

    public init(ttlSeconds: Int? = nil, collapseKey: String? = nil) {
        self.ttlSeconds = ttlSeconds
        self.collapseKey = collapseKey
    }

    /// No option: what every change event is sent with.
    public static let none = DeliveryOptions()

    /// The TTL as a protobuf `Duration` in its JSON form (`"3600s"`), as FCM and HMS read it.
    static func durationText(_ seconds: Int) -> String { "\(max(0, seconds))s" }
}
