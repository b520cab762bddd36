import Dispatch
import KafkaClient
import PushCore

/// How many records of one change partition (with its companion) may be in flight before that partition alone is
/// paused, and how far they must drain before it is fetched again.
struct InFlightShare: Sendable, Equatable {
    /// The partition is paused when this many of its records are in flight.
    let limit: Int
    /// It is fetched again when its records in flight drop to this low-water mark (half the limit).
    let resumeAt: Int

    init(limit: Int) {
        self.limit = max(1, limit)
        self.resumeAt = self.limit / 2
    }

    /// The share when `kafka.maxInFlightRecordsPerPartition` is not set: a quarter of the replica's budget, at
    /// least `floor` records (but never more than the budget). A quarter leaves a hot partition with a healthy
    /// provider most of the budget's throughput, while three stalled partitions together still leave a quarter to
    /// the others; the floor keeps a useful pipeline per partition when the budget is small. Fixed (not divided by
    /// the partitions owned now), so a rebalance never changes a partition's share under its records in flight.
    static func derived(maxInFlight: Int, floor: Int = 16) -> InFlightShare {
        InFlightShare(limit: max(min(maxInFlight, floor), maxInFlight / 4))
    }
}

/// The change partitions' consumed-but-unfinished records: a record's offset is stored for commit only when
/// every earlier record of its partition is finished too (at-least-once: a crash replays the unfinished
/// suffix).
///
/// Back-pressure, per partition first: when a partition's records in flight reach its ``InFlightShare``, that
/// partition alone stops being fetched (``FetchPauses``, reason `budget`) until they drain to the share's
/// low-water mark, so one app's slow provider does not stop the other partitions' apps. The replica's whole budget
/// (`maxInFlight`) stays the last resort: the consumer's thread waits while that many records are unfinished.
///
/// The companion topic's partition p (user notifications, assigned with change partition p) is tracked alongside
/// change partition p: assigned, counted in flight (against p's share), paused and forgotten with it.
final class OffsetLedger: Sendable {
    /// One change partition's records in flight (with its companion partition's).
    private struct PartitionLedger: Sendable {
        var change = OffsetTracker()
        var companion = OffsetTracker()
        /// Unfinished records of both topics: what the share bounds. A tracker's `inFlight` also counts the finished
        /// records after an unfinished one (not committable yet).
        var unfinished = 0
        /// Paused because its records in flight reached its share.
        var overBudget = false
    }

    private let storeOffsets: @Sendable ([TopicPartition: Int64]) -> Void
    private let topic: String
    private let companion: String?
    /// Each partition behind its own lock: records of different partitions never wait for each other here.
    private let partitions = PartitionStripes<PartitionLedger>()
    private let capacity: DispatchSemaphore
    private let share: InFlightShare
    private let pauses: FetchPauses
    private let metrics: GatewayMetrics

    /// `storeOffsets` stores commit positions (the consumer's); `share`: nil derives it from `maxInFlight`.
    init(
        storeOffsets: @escaping @Sendable ([TopicPartition: Int64]) -> Void, topic: String, companion: String? = nil, maxInFlight: Int,
        share: InFlightShare? = nil, pauses: FetchPauses, metrics: GatewayMetrics
    ) {
        self.storeOffsets = storeOffsets
        self.topic = topic
        self.companion = companion
        // Created empty and filled, so that the ledger may go away with records in flight (libdispatch traps when
        // a semaphore is disposed of below its initial value).
        self.capacity = DispatchSemaphore(value: 0)
        for _ in 0..<max(0, maxInFlight) { capacity.signal() }
        self.share = share ?? .derived(maxInFlight: maxInFlight)
        self.pauses = pauses
        self.metrics = metrics
    }

    convenience init(
        consumer: KafkaConsumer, topic: String, companion: String? = nil, maxInFlight: Int, share: InFlightShare? = nil, pauses: FetchPauses,
        metrics: GatewayMetrics
    ) {
        self.init(
            storeOffsets: { consumer.storeOffsets($0) }, topic: topic, companion: companion, maxInFlight: maxInFlight, share: share,
            pauses: pauses, metrics: metrics)
    }

    /// Blocks the consumer's thread until a record may be taken in (at most `maxInFlight` unfinished).
    func waitForCapacity() {
        capacity.wait()
        metrics.inFlightRecords.increment()
    }

    /// Gives back the place of a record taken in but never started (e.g. its partition was revoked).
    func giveBack() {
        metrics.inFlightRecords.decrement()
        capacity.signal()
    }

    /// A record is being worked on (call in offset order, per partition). `companion`: it is of the companion topic.
    /// The partition is paused when this record fills its share.
    func start(partition: Int32, offset: Int64, companion: Bool = false) {
        partitions.withLock(partition) { entry in
            if entry == nil { entry = PartitionLedger() }
            // Stored properties, mutated in place (a tracker copied out and back would copy its offsets).
            if companion { entry?.companion.start(offset) } else { entry?.change.start(offset) }
            entry?.unfinished += 1
            guard entry?.overBudget == false, (entry?.unfinished ?? 0) >= share.limit else { return }
            entry?.overBudget = true
            pauses.hold([partition], for: .budget)
            metrics.partitionsPausedForBudget.increment()  // counted up and down: partitions change it concurrently
        }
    }

    /// A record's work is finished: moves the partition's commit position over the finished prefix, and lets the
    /// partition be fetched again (for its budget) once its records in flight are down to the low-water mark.
    /// `topic`: nil for the change topic.
    func finish(partition: Int32, offset: Int64, topic: String? = nil) {
        let isCompanion = topic.map { $0 != self.topic } ?? false
        let position = partitions.withLock(partition) { entry -> Int64? in
            guard entry != nil else { return nil }
            let position = isCompanion ? entry?.companion.finish(offset) : entry?.change.finish(offset)
            let unfinished = max(0, (entry?.unfinished ?? 0) - 1)
            entry?.unfinished = unfinished
            if entry?.overBudget == true, unfinished <= share.resumeAt {
                entry?.overBudget = false
                releaseBudget(of: partition)
            }
            return position
        }
        let key = TopicPartition(topic: isCompanion ? (topic ?? self.topic) : self.topic, partition: partition)
        if let position { storeOffsets([key: position]) }
        giveBack()
    }

    /// Under `partition`'s lock, once its ledger says it is no longer over its budget.
    private func releaseBudget(of partition: Int32) {
        pauses.release([partition], for: .budget)
        metrics.partitionsPausedForBudget.decrement()
    }

    func assigned(_ partitions: [Int32]) {
        for partition in partitions {
            self.partitions.withLock(partition) { entry in
                if entry == nil { entry = PartitionLedger() }
            }
        }
    }

    /// Forgets revoked partitions (and their budget pauses); `abandoned` records of theirs were never finished:
    /// their places are given back (the new owner consumes them again).
    func revoked(_ partitions: [Int32], abandoned: Int) {
        for partition in partitions {
            self.partitions.withLock(partition) { entry in
                if entry?.overBudget == true { releaseBudget(of: partition) }
                entry = nil
            }
        }
        for _ in 0..<abandoned { giveBack() }
    }

    /// Unfinished records of `partition` (change and companion topics).
    func inFlight(_ partition: Int32) -> Int { partitions.withLock(partition) { $0?.unfinished ?? 0 } }

    /// Whether `partition` is paused for its budget.
    func isOverBudget(_ partition: Int32) -> Bool { partitions.withLock(partition) { $0?.overBudget ?? false } }

    var totalInFlight: Int { partitions.reduce(0) { $0 + $1.change.inFlight + $1.companion.inFlight } }
}
