import Dispatch
import KafkaClient
import PushCore
import Synchronization

/// The change partitions' consumed-but-unfinished records: a record's offset is stored for commit only when
/// every earlier record of its partition is finished too (at-least-once: a crash replays the unfinished
/// suffix), and consumption waits while `maxInFlight` records are unfinished (back-pressure).
///
/// The companion topic's partition p (user notifications, assigned with change partition p) is tracked alongside
/// change partition p: assigned, counted in flight and forgotten with it.
final class OffsetLedger: Sendable {
    private let consumer: KafkaConsumer
    private let topic: String
    private let companion: String?
    private let trackers = Mutex<[TopicPartition: OffsetTracker]>([:])
    private let capacity: DispatchSemaphore
    private let metrics: GatewayMetrics

    init(consumer: KafkaConsumer, topic: String, companion: String? = nil, maxInFlight: Int, metrics: GatewayMetrics) {
        self.consumer = consumer
        self.topic = topic
        self.companion = companion
        self.capacity = DispatchSemaphore(value: maxInFlight)
        self.metrics = metrics
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
    private func both(_ partition: Int32) -> [TopicPartition] {
        [TopicPartition(topic: topic, partition: partition)] + (companion.map { [TopicPartition(topic: $0, partition: partition)] } ?? [])
    }

    /// A record is being worked on (call in offset order, per partition). `companion`: it is of the companion topic.
    func start(partition: Int32, offset: Int64, companion: Bool = false) {
        let key = TopicPartition(topic: companion ? (self.companion ?? topic) : topic, partition: partition)
        trackers.withLock { $0[key, default: OffsetTracker()].start(offset) }
    }

    /// A record's work is finished: moves the partition's commit position over the finished prefix. `topic`: nil
    /// for the change topic.
    func finish(partition: Int32, offset: Int64, topic: String? = nil) {
        let key = TopicPartition(topic: topic ?? self.topic, partition: partition)
        let position = trackers.withLock { trackers -> Int64? in
            guard trackers[key] != nil else { return nil }
            return trackers[key]?.finish(offset)
        }
        if let position { consumer.storeOffsets([key: position]) }
        giveBack()
    }

    func assigned(_ partitions: [Int32]) {
        trackers.withLock { trackers in
            for key in partitions.flatMap(both) where trackers[key] == nil { trackers[key] = OffsetTracker() }
        }
    }

    /// Forgets revoked partitions; `abandoned` records of theirs were never finished: their places are given
    /// back (the new owner consumes them again).
    func revoked(_ partitions: [Int32], abandoned: Int) {
        trackers.withLock { trackers in
            for key in partitions.flatMap(both) { trackers[key] = nil }
        }
        for _ in 0..<abandoned { giveBack() }
    }

    /// Unfinished records of `partition`.
    func inFlight(_ partition: Int32) -> Int {
        let keys = both(partition)
        return trackers.withLock { trackers in keys.reduce(0) { $0 + (trackers[$1]?.inFlight ?? 0) } }
    }

    var totalInFlight: Int { trackers.withLock { $0.values.reduce(0) { $0 + $1.inFlight } } }
}
