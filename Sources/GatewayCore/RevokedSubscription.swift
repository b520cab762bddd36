import PushCore

/// A subscription revoked on this replica whose tombstone is not written yet: matched by nothing, its revoke
/// message queued behind what it already had.
public struct RevokedSubscription: Sendable {
    public var app: String
    public var reason: RevocationReason
    public var subscription: Subscription
    /// The sequence number of the marker record this replica wrote (0 when read from the log): writes produced
    /// before it (lower numbers) are stale and must not bring the subscription back when they are applied.
    public var markerSequence: UInt64
    /// Its tombstone was produced (the revoke was delivered).
    public var tombstoned = false

    public init(app: String, reason: RevocationReason, subscription: Subscription, markerSequence: UInt64) {
        self.app = app
        self.reason = reason
        self.subscription = subscription
        self.markerSequence = markerSequence
    }
}
