import CompactJSON
import PushCore

/// What this replica holds of one partition of the state topic: the apps' indexes, the revoked subscriptions,
/// and what was read from the log. Part of a ``PartitionMachine``: only its inputs change it, so each decision
/// (an API write, an event's matching, a revocation) is made on a state no other one changes meanwhile.
public struct PartitionContents {
    public var role: PartitionRole
    public var apps: [ExactString: AppData] = [:]
    /// The partition's estimated bytes (``ByteMeter``): every app's index adds into it.
    public var bytes: ByteMeter?
    /// The offset of the last change event matched here: a revocation made now comes after it and before the
    /// next one (the revocation point, logged with every revocation).
    public var lastEventOffset: Int64 = -1

    /// Revoked subscriptions whose tombstone is not written yet (see ``RevokedSubscription``).
    public var revoked: [RetryKey: RevokedSubscription] = [:]

    // MARK: Read from the log (loading, standby)

    /// The latest shadow checkpoint per node, restored into the index when the partition is promoted (a
    /// checkpoint may precede its subscription's record in the log).
    public var checkpoints: [ExactString: [DataPath: JSONValue]] = [:]
    /// The pending retries of the previous owner, adopted on promotion.
    public var followedRetries: [RetryKey: [PendingNotification]] = [:]
    /// The offset after the last record known to be in the log (read, or acknowledged to this replica).
    public var logEnd: Int64 = 0
    /// The owner tag of the last load marker read: a record tagged otherwise after it was written by a superseded
    /// owner, and is skipped.
    public var logOwner: [UInt8]?
    /// Records skipped as superseded, by key: once this replica owns the partition it rewrites those keys from
    /// memory (so that compaction, keeping the last record of a key, cannot bring one back).
    public var superseded: [[UInt8]: StateRecord] = [:]

    public init(role: PartitionRole, bytes: ByteMeter? = nil) {
        self.role = role
        self.bytes = bytes
    }

    /// The app's data, created when missing.
    public mutating func app(_ name: String) -> AppData {
        let key = ExactString(name)
        if let app = apps[key] { return app }
        let app = AppData(name: name, partition: bytes)
        apps[key] = app
        return app
    }

    public func existingApp(_ name: String) -> AppData? { apps[ExactString(name)] }

    public var subscriptionCount: Int { apps.values.reduce(0) { $0 + $1.index.subscriptionCount } }

    // MARK: Applying records

    /// Applies a subscription record (read from the log, or acknowledged to the owner with `sequence`):
    /// a live record subscribes, a tombstone unsubscribes, a marker revokes. A write older than a revocation
    /// made here (lower sequence) is ignored.
    public mutating func apply(_ record: SubscriptionRecord, sequence: UInt64?) {
        // The identity is made (and hashed) only when a revocation is involved: not for the records of a load.
        if let sequence, !revoked.isEmpty, let revoked = revoked[record.identity], revoked.markerSequence > sequence { return }
        let app = app(record.app)
        if let reason = record.revoked {
            app.index.unsubscribe(path: record.subscription.path, subscriber: record.subscription.subscriber)
            if sequence == nil {
                revoked[record.identity] = RevokedSubscription(
                    app: record.app, reason: reason, subscription: record.subscription, markerSequence: 0)
            }
            return
        }
        if !revoked.isEmpty { revoked[record.identity] = nil }
        record.apply(to: app.index)
    }

    /// Applies a record read from the state topic at `offset` (loading or standby), written by the owner with tag
    /// `tag` (nil: an untagged record of an older gateway). False when it was skipped as superseded.
    public mutating func applyFromLog(_ record: StateRecord, key: [UInt8], offset: Int64, tag: [UInt8]?) -> Bool {
        logEnd = max(logEnd, offset + 1)
        if let tag, let logOwner, tag != logOwner {
            superseded[key] = record
            return false
        }
        // Skipped (hashing the key) while nothing was superseded: the common case, record after record of a load.
        if !superseded.isEmpty { superseded[key] = nil }
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
