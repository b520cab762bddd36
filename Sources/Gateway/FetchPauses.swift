import KafkaClient

/// Why a change partition (and its companion) is not fetched.
enum PauseReason: Hashable, Sendable {
    /// Not served (yet): assigned and waiting for its state to load, or given up as superseded (``ChangeConsumer``).
    case loading
    /// Its records in flight reached the partition's share of the in-flight budget (``OffsetLedger``).
    case budget
}

/// Who holds each change partition's fetching paused, and why: a partition is fetched only while no reason holds
/// it, so the reasons never resume each other (a partition that drained its budget while it loads stays paused
/// until loaded, and one loaded while over its budget stays paused until it drains).
///
/// The consumer is told inside the partition's lock, so the pauses and resumes of one partition reach it in the
/// order of the decisions; partitions do not share a lock.
final class FetchPauses: Sendable {
    /// The reasons holding a partition, and whether the consumer was told to pause it.
    private struct Held: Sendable {
        var reasons: Set<PauseReason> = []
        /// False while only a deferred hold holds it (``hold(_:for:deferred:)``): the consumer still fetches it.
        var applied = false
    }

    private let held = PartitionStripes<Held>()
    private let pauseFetching: @Sendable ([Int32]) -> Void
    private let resumeFetching: @Sendable ([Int32]) -> Void

    /// `pause` and `resume` stop and restart the fetching of change partitions (and their companions').
    init(pause: @escaping @Sendable ([Int32]) -> Void, resume: @escaping @Sendable ([Int32]) -> Void) {
        self.pauseFetching = pause
        self.resumeFetching = resume
    }

    /// Pauses and resumes `topic`'s partitions on `consumer`, partition p of `companion` with partition p.
    convenience init(consumer: KafkaConsumer, topic: String, companion: String?) {
        self.init(
            pause: { consumer.pause(Self.fetched($0, topic: topic, companion: companion)) },
            resume: { consumer.resume(Self.fetched($0, topic: topic, companion: companion)) })
    }

    /// Partitions `partitions` of `topic` and of its `companion` (partition p with partition p).
    static func fetched(_ partitions: some Sequence<Int32>, topic: String, companion: String?) -> [TopicPartition] {
        partitions.flatMap { partition in
            [TopicPartition(topic: topic, partition: partition)] + (companion.map { [TopicPartition(topic: $0, partition: partition)] } ?? [])
        }
    }

    /// `reason` holds `partitions`: those not paused yet stop being fetched. `deferred`: the consumer is told only at
    /// ``applyDeferred(_:)`` (or when another reason comes). A partition just assigned is held that way: librdkafka
    /// applies a pause asynchronously, and a pause that races the start of the partition's fetcher can leave the
    /// partition unfetched for good; once a record of it arrived, its fetcher has started.
    func hold(_ partitions: some Sequence<Int32>, for reason: PauseReason, deferred: Bool = false) {
        for partition in partitions {
            held.withLock(partition) { entry in
                var state = entry ?? Held()
                state.reasons.insert(reason)
                if !state.applied, !deferred {
                    pauseFetching([partition])
                    state.applied = true
                }
                entry = state
            }
        }
    }

    /// Tells the consumer to pause `partition` if a deferred hold holds it and it was not told yet.
    func applyDeferred(_ partition: Int32) {
        held.withLock(partition) { entry in
            guard var state = entry, !state.reasons.isEmpty, !state.applied else { return }
            pauseFetching([partition])
            state.applied = true
            entry = state
        }
    }

    /// `reason` no longer holds `partitions`: those no other reason holds are fetched again.
    func release(_ partitions: some Sequence<Int32>, for reason: PauseReason) {
        for partition in partitions {
            held.withLock(partition) { entry in
                guard var state = entry, state.reasons.remove(reason) != nil else { return }
                guard state.reasons.isEmpty else {
                    entry = state
                    return
                }
                entry = nil
                // Told even when this hold was never applied: a partition paused when it was revoked stays paused in
                // librdkafka through a later assignment. (Resuming a partition that is not paused changes nothing.)
                resumeFetching([partition])
            }
        }
    }

    /// Forgets `partitions` (revoked: no longer fetched here at all; an assignment starts with no reason held).
    func forget(_ partitions: some Sequence<Int32>) {
        for partition in partitions { held.withLock(partition) { $0 = nil } }
    }

    /// The reasons holding `partition` (empty: fetched).
    func reasons(_ partition: Int32) -> Set<PauseReason> { held.withLock(partition) { $0?.reasons ?? [] } }
}
