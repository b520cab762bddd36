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
    private let held = PartitionStripes<Set<PauseReason>>()
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

    /// `reason` holds `partitions`: those no reason held before stop being fetched.
    func hold(_ partitions: some Sequence<Int32>, for reason: PauseReason) {
        for partition in partitions {
            held.withLock(partition) { reasons in
                if reasons?.isEmpty ?? true { pauseFetching([partition]) }
                reasons = (reasons ?? []).union([reason])
            }
        }
    }

    /// `reason` no longer holds `partitions`: those no other reason holds are fetched again.
    func release(_ partitions: some Sequence<Int32>, for reason: PauseReason) {
        for partition in partitions {
            held.withLock(partition) { reasons in
                guard reasons?.remove(reason) != nil, reasons?.isEmpty ?? true else { return }
                reasons = nil
                resumeFetching([partition])
            }
        }
    }

    /// Forgets `partitions` (revoked: no longer fetched here at all; an assignment starts with no reason held).
    func forget(_ partitions: some Sequence<Int32>) {
        for partition in partitions { held.withLock(partition) { $0 = nil } }
    }

    /// The reasons holding `partition` (empty: fetched).
    func reasons(_ partition: Int32) -> Set<PauseReason> { held.withLock(partition) { $0 ?? [] } }
}
