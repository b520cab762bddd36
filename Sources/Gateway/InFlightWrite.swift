import KafkaClient
import PushCore

/// A record produced by the owner and not applied yet (writes apply in produce order).
struct InFlightWrite {
    /// The state record; nil for an ownership check (``OwnerTag/ownerCheckKey``), which holds no state.
    var record: StateRecord?
    /// When it was produced (``Uptime``): its landing where expected confirms ownership after that instant.
    var producedAt: UInt64
    /// Set when the broker answered: the offset, or the error.
    var result: Result<Int64, KafkaError>?
    /// Called once the record is applied (true) or failed (false), outside the lock.
    var onSettled: (@Sendable (Bool) -> Void)?
    /// Called (before `onSettled(false)`) when the write failed in a way that may still have stored it.
    var onMaybeStored: (@Sendable () -> Void)?
    /// Not an API write: later decisions about the same subscription do not wait for it.
    var uncounted = false
    /// The write creates a subscription: reserved in its app's quota counts until applied.
    var creates: Subscription?

    init(record: StateRecord?, onSettled: (@Sendable (Bool) -> Void)?, uncounted: Bool = false) {
        self.record = record
        self.producedAt = Uptime.now
        self.onSettled = onSettled
        self.uncounted = uncounted
    }
}
