import Dispatch
import KafkaClient
import PushCore
import Synchronization

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
    private struct State {
        var trackers: [TopicPartition: OffsetTracker] = [:]
        /// Unfinished records per change partition (with its companion's): what its share bounds. A tracker's
        /// `inFlight` also counts the finished records after an unfinished one (not committable yet).
        var unfinished: [Int32: Int] = [:]
        /// Change partitions paused because their records in flight reached their share.
        var overBudget: Set<Int32> = []
    }

    private let storeOffsets: @Sendable ([TopicPartition: Int64]) -> Void
    private let topic: String
    private let companion: String?
    private let state = Mutex(State())
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

    /// The topics tracked for a partition number: the change topic, and the companion when there is one.
    private func both(_ partition: Int32) -> [TopicPartition] { FetchPauses.fetched([partition], topic: topic, companion: companion) }

    /// A record is being worked on (call in offset order, per partition). `companion`: it is of the companion topic.
    /// The partition is paused when this record fills its share.
    func start(partition: Int32, offset: Int64, companion: Bool = false) {
        let key = TopicPartition(topic: companion ? (self.companion ?? topic) : topic, partition: partition)
        state.withLock { state in
            state.trackers[key, default: OffsetTracker()].start(offset)
            state.unfinished[partition, default: 0] += 1
            guard !state.overBudget.contains(partition), state.unfinished[partition, default: 0] >= share.limit else { return }
            state.overBudget.insert(partition)
            pauses.hold([partition], for: .budget)
            metrics.partitionsPausedForBudget.set(Double(state.overBudget.count))
        }
    }

    /// A record's work is finished: moves the partition's commit position over the finished prefix, and lets the
    /// partition be fetched again (for its budget) once its records in flight are down to the low-water mark.
    /// `topic`: nil for the change topic.
    func finish(partition: Int32, offset: Int64, topic: String? = nil) {
        let key = TopicPartition(topic: topic ?? self.topic, partition: partition)
        let position = state.withLock { state -> Int64? in
            guard state.trackers[key] != nil else { return nil }
            let position = state.trackers[key]?.finish(offset)
            let unfinished = max(0, state.unfinished[partition, default: 0] - 1)
            state.unfinished[partition] = unfinished > 0 ? unfinished : nil
            if state.overBudget.contains(partition), unfinished <= share.resumeAt {
                releaseBudget(of: [partition], in: &state)
            }
            return position
        }
        if let position { storeOffsets([key: position]) }
        giveBack()
    }

    private func releaseBudget(of partitions: Set<Int32>, in state: inout State) {
        let released = state.overBudget.intersection(partitions)
        guard !released.isEmpty else { return }
        state.overBudget.subtract(released)
        pauses.release(released, for: .budget)
        metrics.partitionsPausedForBudget.set(Double(state.overBudget.count))
    }

    func assigned(_ partitions: [Int32]) {
        state.withLock { state in
            for key in partitions.flatMap(both) where state.trackers[key] == nil { state.trackers[key] = OffsetTracker() }
        }
    }

    /// Forgets revoked partitions (and their budget pauses); `abandoned` records of theirs were never finished:
    /// their places are given back (the new owner consumes them again).
    func revoked(_ partitions: [Int32], abandoned: Int) {
        state.withLock { state in
            for key in partitions.flatMap(both) { state.trackers[key] = nil }
            for partition in partitions { state.unfinished[partition] = nil }
            releaseBudget(of: Set(partitions), in: &state)
        }
        for _ in 0..<abandoned { giveBack() }
    }

    /// Unfinished records of `partition` (change and companion topics).
    func inFlight(_ partition: Int32) -> Int { state.withLock { $0.unfinished[partition] ?? 0 } }

    /// Whether `partition` is paused for its budget.
    func isOverBudget(_ partition: Int32) -> Bool { state.withLock { $0.overBudget.contains(partition) } }

    var totalInFlight: Int { state.withLock { $0.trackers.values.reduce(0) { $0 + $1.inFlight } } }
}
