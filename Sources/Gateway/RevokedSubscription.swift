import PushCore

/// A subscription revoked on this replica whose tombstone is not written yet: matched by nothing, its revoke
/// message queued behind what it already had.
struct RevokedSubscription {
    var app: String
    var reason: RevocationReason
    var subscription: Subscription
    /// The sequence number of the marker record this replica wrote (0 when read from the log): writes produced
    /// before it (lower numbers) are stale and must not bring the subscription back when they are applied.
    var markerSequence: UInt64
    /// Its tombstone was produced (the revoke was delivered).
    var tombstoned = false
}
