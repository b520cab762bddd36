import KafkaClient
import PushCore

/// Everything this replica holds of one partition of the state topic. Guarded by ``PartitionState``'s lock:
/// the event processing, the API, the revocation sweep and the acknowledgements of the owner's writes all
/// change it under that lock, so that each decision is made on a state no other one changes meanwhile.
struct PartitionContents {
    var role: PartitionRole
    var apps: [ExactString: AppData] = [:]
    /// The partition's estimated bytes (``StateBudget``): every app's index adds into it.
    var bytes: ByteMeter?
    /// The offset of the last change event matched here: a revocation made now comes after it and before the
    /// next one (the revocation point, logged with every revocation).
    var lastEventOffset: Int64 = -1

    // MARK: The owner's writes, applied in produce order

    var nextSequence: UInt64 = 1
    var nextToApply: UInt64 = 1
    var inFlight: [UInt64: InFlightWrite] = [:]
    /// Subscription writes produced and not applied yet, per identity: a new decision about the same
    /// subscription waits for them (so that two creates of one subscription give 201 and 409, never 201 twice).
    var pendingWrites: [RetryKey: Int] = [:]
    var identityWaiters: [RetryKey: [CheckedContinuation<Void, Never>]] = [:]
    /// Called when no write is in flight any more.
    var drainWaiters: [@Sendable () -> Void] = []

    /// Subscriptions whose record is to be written again (a write failed): ``PartitionState/scheduleRepair(_:delay:)``.
    var repairs: Set<RetryKey> = []
    /// What waits for a repair to be stored (the ticket of the event whose revocation marker failed).
    var repairWaiters: [RetryKey: [@Sendable () -> Void]] = [:]

    /// Revoked subscriptions whose tombstone is not written yet (see ``RevokedSubscription``).
    var revoked: [RetryKey: RevokedSubscription] = [:]

    // MARK: Ownership (``OwnershipFence``)

    /// This replica's ownership, once promoted: its tag, and what its writes confirm.
    var fence: OwnershipFence?
    /// The tag and offset of the load marker this replica wrote, until it is promoted.
    var marker: (tag: [UInt8], offset: Int64, writtenAt: UInt64)?
    /// Every tag this replica wrote a load marker with for this partition (its own markers never supersede it).
    var ownTags: Set<[UInt8]> = []

    // MARK: Read from the log (loading, standby)

    /// The latest shadow checkpoint per node, restored into the index when the partition is promoted (a
    /// checkpoint may precede its subscription's record in the log).
    var checkpoints: [ExactString: [DataPath: JSONValue]] = [:]
    /// The pending retries of the previous owner, adopted on promotion.
    var followedRetries: [RetryKey: [PendingNotification]] = [:]
    /// The offset after the last record known to be in the log (read, or acknowledged to this replica).
    var logEnd: Int64 = 0
    /// The owner tag of the last load marker read: a record tagged otherwise after it was written by a superseded
    /// owner, and is skipped.
    var logOwner: [UInt8]?
    /// Records skipped as superseded, by key: once this replica owns the partition it rewrites those keys from
    /// memory (so that compaction, keeping the last record of a key, cannot bring one back).
    var superseded: [[UInt8]: StateRecord] = [:]

    init(role: PartitionRole) { self.role = role }

    /// The app's data, created when missing.
    mutating func app(_ name: String) -> AppData {
        let key = ExactString(name)
        if let app = apps[key] { return app }
        let app = AppData(name: name, partition: bytes)
        apps[key] = app
        return app
    }

    func existingApp(_ name: String) -> AppData? { apps[ExactString(name)] }

    var subscriptionCount: Int { apps.values.reduce(0) { $0 + $1.index.subscriptionCount } }

    // MARK: Applying records

    /// Applies a subscription record (read from the log, or acknowledged to the owner with `sequence`):
    /// a live record subscribes, a tombstone unsubscribes, a marker revokes. A write older than a revocation
    /// made here (lower sequence) is ignored.
    mutating func apply(_ record: SubscriptionRecord, sequence: UInt64?) {
        let key = record.identity
        if let sequence, let revoked = revoked[key], revoked.markerSequence > sequence { return }
        let app = app(record.app)
        if let reason = record.revoked {
            app.index.unsubscribe(path: record.subscription.path, subscriber: record.subscription.subscriber)
            if sequence == nil {
                revoked[key] = RevokedSubscription(
                    app: record.app, reason: reason, subscription: record.subscription, markerSequence: 0)
            }
            return
        }
        revoked[key] = nil
        record.apply(to: app.index)
    }

    /// Applies a record read from the state topic at `offset` (loading or standby), written by the owner with tag
    /// `tag` (nil: an untagged record of an older gateway). False when it was skipped as superseded.
    mutating func applyFromLog(_ record: StateRecord, key: [UInt8], offset: Int64, tag: [UInt8]?) -> Bool {
        logEnd = max(logEnd, offset + 1)
        if let tag, let logOwner, tag != logOwner {
            superseded[key] = record
            return false
        }
        superseded[key] = nil
        switch record {
        case .subscription(let subscription):
            apply(subscription, sequence: nil)
        case .shadow(let shadow):
            checkpoints[ExactString(shadow.app), default: [:]][shadow.path] = shadow.value
        case .retry(let retry):
            followedRetries[retry.key] = retry.entries.isEmpty ? nil : retry.entries
        }
        return true
    }
}
