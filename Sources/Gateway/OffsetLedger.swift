import Dispatch
import KafkaClient
import PushCore
import Synchronization

/// The change partitions' consumed-but-unfinished records: a record's offset is stored for commit only when
/// every earlier record of its partition is finished too (at-least-once: a crash replays the unfinished
/// suffix), and consumption waits while `maxInFlight` records are unfinished (back-pressure).
final class OffsetLedger: Sendable {
    private let consumer: KafkaConsumer
    private let topic: String
    private let trackers = Mutex<[Int32: OffsetTracker]>([:])
    private let capacity: DispatchSemaphore
    private let metrics: GatewayMetrics

    init(consumer: KafkaConsumer, topic: String, maxInFlight: Int, metrics: GatewayMetrics) {
        self.consumer = consumer
        self.topic = topic
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

    /// A record is being worked on (call in offset order, per partition).
    func start(partition: Int32, offset: Int64) {
        trackers.withLock { $0[partition, default: OffsetTracker()].start(offset) }
    }

    /// A record's work is finished: moves the partition's commit position over the finished prefix.
    func finish(partition: Int32, offset: Int64) {
        let position = trackers.withLock { trackers -> Int64? in
            guard trackers[partition] != nil else { return nil }
            return trackers[partition]?.finish(offset)
        }
        if let position { consumer.storeOffsets([TopicPartition(topic: topic, partition: partition): position]) }
        giveBack()
    }

    func assigned(_ partitions: [Int32]) {
        trackers.withLock { trackers in
            for partition in partitions where trackers[partition] == nil { trackers[partition] = OffsetTracker() }
        }
    }

    /// Forgets revoked partitions; `abandoned` records of theirs were never finished: their places are given
    /// back (the new owner consumes them again).
    func revoked(_ partitions: [Int32], abandoned: Int) {
        trackers.withLock { trackers in
            for partition in partitions { trackers[partition] = nil }
        }
        for _ in 0..<abandoned { giveBack() }
    }

    /// Unfinished records of `partition`.
    func inFlight(_ partition: Int32) -> Int { trackers.withLock { $0[partition]?.inFlight ?? 0 } }

    var totalInFlight: Int { trackers.withLock { $0.values.reduce(0) { $0 + $1.inFlight } } }
}
