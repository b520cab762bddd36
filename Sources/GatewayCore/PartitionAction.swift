import PushCore

/// What a ``PartitionMachine`` asks its driver to do after an input.
///
/// Order matters for the first four: the log must hold the records in decision order, each subscription's
/// line must get its notifications in decision order, an event's ticket must be retained before anything
/// can release it, and an app's event hook hears of its ended subscriptions in the order their tombstones are stored. A driver issues them in the order given and in the order of the inputs (``isOrdered``).
public enum PartitionAction: Sendable, Equatable {
    /// Produce a record to the partition, tagged with the owner's tag when there is one. Its acknowledgement comes
    /// back as ``PartitionMachine/writeAcknowledged(_:_:uptime:)``.
    case produce(sequence: UInt64, key: [UInt8], value: [UInt8], tag: [UInt8]?)
    /// Queue notifications for delivery, each behind what its subscription already has.
    case deliver([PendingNotification])
    /// The change event's ticket waits for `count` more things (notifications, markers, checkpoints).
    case retainTicket(UInt64, count: Int)
    /// A subscription ended and its tombstone is stored: its app's event hook hears of it, in the order the
    /// tombstones were stored.
    case subscriptionEnded(EndedSubscription)
    /// One of them is settled.
    case releaseTicket(UInt64)
    /// A write settled: applied (`stored`), or failed (`maybeStored`: it timed out after it was sent, so the broker
    /// may have it all the same).
    case settle(Reply, stored: Bool, maybeStored: Bool)
    /// A waiter's answer (a confirmation of ownership, the end of a subscription's writes or of all writes).
    case resume(Reply, Bool)
    /// Call ``PartitionMachine/timerFired(_:uptime:)`` with `timer` after `seconds`.
    case schedule(PartitionTimer, after: Double)
    /// Read the partition's records `from..<to` back (after `after` seconds) and report them with
    /// ``PartitionMachine/gapRead(from:to:tag:attempt:records:uptime:)``.
    case readGap(from: Int64, to: Int64, tag: [UInt8], attempt: Int, after: Double)
    /// Another owner's marker is in the log after this replica's: serving and writing the partition stopped.
    case superseded(gapFrom: Int64, gapTo: Int64)
    /// Records of an earlier owner were found after this owner's marker; their keys are being rewritten.
    case zombieWritesRewritten(count: Int)
    /// A superseded record touched this pending-retry line: it must be written again as memory has it.
    case rewriteRetryLine(RetryKey)
    /// A write failed (to be logged; the machine repairs what needs it).
    case writeFailed(WriteFailure)
    /// A shadow checkpoint was not written again: the partition moved.
    case checkpointDropped(app: String)

    /// Whether the driver must issue it in decision order with the other inputs' ordered actions (produce,
    /// deliver, retain a ticket, an ended subscription); the others need no order between inputs.
    public var isOrdered: Bool {
        switch self {
        case .produce, .deliver, .retainTicket, .subscriptionEnded: return true
        default: return false
        }
    }
}

/// Whoever waits for an answer of a ``PartitionMachine`` (an API call, a checkpoint's owner, a waiter): the machine
/// only hands it back (``PartitionAction/settle(_:stored:maybeStored:)``, ``PartitionAction/resume(_:_:)``), and the
/// driver calls it. Equal by `id` (the tests name their replies; the gateway's are all 0).
public struct Reply: Sendable, Equatable, CustomStringConvertible {
    public let id: UInt64
    private let body: @Sendable (_ ok: Bool, _ maybeStored: Bool) -> Void

    public init(id: UInt64 = 0, _ body: @escaping @Sendable (_ ok: Bool, _ maybeStored: Bool) -> Void) {
        self.id = id
        self.body = body
    }

    /// Answers: stored or confirmed (`ok`), and for a failed write whether it may be stored all the same.
    public func callAsFunction(_ ok: Bool, _ maybeStored: Bool) { body(ok, maybeStored) }

    public static func == (left: Reply, right: Reply) -> Bool { left.id == right.id }

    public var description: String { "Reply(\(id))" }
}

/// Something a ``PartitionMachine`` wants to be told about later.
public enum PartitionTimer: Sendable, Hashable {
    /// Write the subscription's record again as memory has it (a write of it failed); `delay` is this attempt's
    /// wait, doubled for the next one.
    case repair(RetryKey, delay: Double)
    /// Write the node's shadow again (its checkpoint failed); the event's ticket waits for it.
    case checkpoint(app: String, path: DataPath, ticket: UInt64, delay: Double)
    /// Write an ownership check for the waiters no write in flight will confirm.
    case ownershipCheck
    /// The confirmation waiter `id` gives up.
    case confirmationTimeout(UInt64)

    /// Whether it writes a record again (a repair, a checkpoint, an ownership check): like every write retried until
    /// stored, it ends when the log takes no more records (a shutdown). A confirmation's timeout always runs.
    public var writesAgain: Bool {
        if case .confirmationTimeout = self { return false }
        return true
    }

    /// Whether the driver should spread the wait (±20 %), so that repairs after an outage do not come together.
    public var jittered: Bool {
        if case .repair = self { return true }
        return false
    }
}

/// Why a write was not stored, as the machine needs it.
public struct WriteFailure: Error, Sendable, Equatable {
    /// Groups failures for logging (one line per kind and interval).
    public var code: String
    public var message: String
    /// It timed out after it was sent: the broker may have stored it.
    public var maybeStored: Bool

    public init(code: String, message: String, maybeStored: Bool) {
        self.code = code
        self.message = message
        self.maybeStored = maybeStored
    }

    static let superseded = WriteFailure(code: "superseded", message: "superseded by another owner of the partition", maybeStored: false)
    /// The replica stopped before it could tell whether the write was a superseded owner's (``PartitionMachine/gapAbandoned(uptime:)``).
    static let stopping = WriteFailure(code: "stopping", message: "the replica stopped before the write's ownership was known", maybeStored: true)
}

/// What matching one event did.
public struct EventOutcome: Sendable, Equatable {
    public var notifications = 0
    /// Revoked by the event itself (`too_big`, `namespace_does_not_exist`).
    public var revoked = 0
    /// Revoked as `expired` before the event was matched.
    public var expired = 0
    /// The offset of the last change event matched before this one: the revocation point of both.
    public var afterOffset: Int64 = -1

    public init(notifications: Int = 0, revoked: Int = 0, expired: Int = 0, afterOffset: Int64 = -1) {
        self.notifications = notifications
        self.revoked = revoked
        self.expired = expired
        self.afterOffset = afterOffset
    }
}
