import KafkaClient
import Synchronization

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
/// The consumer is told inside the lock, so the pauses and resumes of one partition reach it in the order of the
/// decisions.
final class FetchPauses: Sendable {
    private let held = Mutex<[Int32: Set<PauseReason>]>([:])
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
        held.withLock { held in
            var stopped: [Int32] = []
            for partition in partitions {
                if held[partition, default: []].isEmpty { stopped.append(partition) }
                held[partition, default: []].insert(reason)
            }
            if !stopped.isEmpty { pauseFetching(stopped.sorted()) }
        }
    }

    /// `reason` no longer holds `partitions`: those no other reason holds are fetched again.
    func release(_ partitions: some Sequence<Int32>, for reason: PauseReason) {
        held.withLock { held in
            var restarted: [Int32] = []
            for partition in partitions {
                guard var reasons = held[partition], reasons.remove(reason) != nil else { continue }
                held[partition] = reasons.isEmpty ? nil : reasons
                if reasons.isEmpty { restarted.append(partition) }
            }
            if !restarted.isEmpty { resumeFetching(restarted.sorted()) }
        }
    }

    /// Forgets `partitions` (revoked: no longer fetched here at all; an assignment starts with no reason held).
    func forget(_ partitions: some Sequence<Int32>) {
        held.withLock { held in
            for partition in partitions { held[partition] = nil }
        }
    }

    /// The reasons holding `partition` (empty: fetched).
    func reasons(_ partition: Int32) -> Set<PauseReason> { held.withLock { $0[partition] ?? [] } }
}
