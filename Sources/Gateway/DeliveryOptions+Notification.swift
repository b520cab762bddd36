import Providers
import PushCore

extension DeliveryOptions {
    /// What a queued notification is sent with (docs/DELIVERY.md, "TTL and collapse key"): a user notification's
    /// collapse key, and its TTL counted from its first attempt. The first attempt (and one queued behind a
    /// backing-off line, never tried) carries the TTL as published; a retry carries what is left of it since its
    /// first failure, in whole seconds rounded down. nil: the TTL has run out (a retry with nothing left: a TTL
    /// of 0 means one attempt), and the notification is not sent. Other notifications: ``none``.
    static func of(_ entry: PendingNotification, now: Double) -> DeliveryOptions? {
        guard case .user(let message) = entry.content else { return DeliveryOptions.none }
        guard var ttl = message.ttlSeconds else { return DeliveryOptions(collapseKey: message.collapseKey) }
        if entry.attempt > 0 {
            let elapsed = max(0, now - entry.firstFailureAt)
            // A TTL is at most 28 days, `elapsed` at most the 2-hour retry window: no overflow.
            ttl -= Int(elapsed.rounded(.up))
            if ttl <= 0 { return nil }
        }
        return DeliveryOptions(ttlSeconds: ttl, collapseKey: message.collapseKey)
    }
}
