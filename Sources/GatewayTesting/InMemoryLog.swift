import Foundation
import KafkaClient
import Synchronization

/// A log in memory that behaves like the topics the gateway uses, for unit tests: records are appended per
/// (topic, partition) with offsets, acknowledged asynchronously (or held back, to test what waits for an
/// acknowledgement), and read by ``Reader``s with assigned partitions. No compaction.
public final class InMemoryLog: RecordSink, Sendable {
    private struct State {
        var partitions: [String: Int32] = [:]
        var records: [TopicPartition: [KafkaRecord]] = [:]
        var holding = false
        var held: [@Sendable () -> Void] = []
        var failing = false
        /// Produces refused at once (as librdkafka refuses a record when its queue is full), this many more.
        var refusing = 0
        /// While set, every record is stored and reported failed with this error.
        var losing: KafkaError?
    }

    private let state = Mutex(State())
    private let acknowledgements = DispatchQueue(label: "in-memory-log-acks")

    /// The timer service its writes are retried on: each log has its own, which a test shuts down to stop the
    /// gateway's timers as the lifecycle does.
    public let timers: Timers

    public init(topics: [String: Int32], timers: Timers = Timers(label: "in-memory-log-timers")) {
        self.timers = timers
        state.withLock { $0.partitions = topics }
    }

    /// Acknowledgements are held until ``releaseAcknowledgements()`` (writes stay in flight).
    public func holdAcknowledgements() { state.withLock { $0.holding = true } }

    public func releaseAcknowledgements() {
        let held = state.withLock { state -> [@Sendable () -> Void] in
            state.holding = false
            defer { state.held = [] }
            return state.held
        }
        for acknowledge in held { acknowledgements.async(execute: acknowledge) }
    }

    /// While set, every produce fails (a broker that does not acknowledge).
    public func setFailing(_ failing: Bool) { state.withLock { $0.failing = failing } }

    /// The next `count` produces are refused at once (``produce(_:completion:)`` returns the error; nothing is
    /// stored and no acknowledgement comes), as librdkafka refuses a record while its queue is full.
    public func refuseNext(_ count: Int) { state.withLock { $0.refusing = count } }

    /// While set, every record is stored but reported failed: by default as a timeout after the broker wrote it
    /// (`RD_KAFKA_RESP_ERR__MSG_TIMED_OUT`, possibly persisted); `error` reports another failure instead.
    public func setLosingAcknowledgements(_ losing: Bool, error: KafkaError? = nil) {
        let timedOut = KafkaError(code: -192, message: "in-memory log: timed out (stored)", possiblyPersisted: true)
        state.withLock { $0.losing = losing ? (error ?? timedOut) : nil }
    }

    public func records(_ topic: String, partition: Int32) -> [KafkaRecord] {
        state.withLock { $0.records[TopicPartition(topic: topic, partition: partition)] ?? [] }
    }

    public func produce(
        _ record: KafkaRecord, completion: @escaping @Sendable (Result<(partition: Int32, offset: Int64), KafkaError>) -> Void
    ) -> KafkaError? {
        let refused = KafkaError(code: -184, message: "in-memory log: queue full")
        let outcome = state.withLock { state -> Result<@Sendable () -> Void, KafkaError> in
            guard let count = state.partitions[record.topic] else { return .failure(KafkaError(message: "unknown topic \(record.topic)")) }
            if state.refusing > 0 {
                state.refusing -= 1
                return .failure(refused)
            }
            if state.failing {
                let acknowledge: @Sendable () -> Void = { completion(.failure(KafkaError(message: "in-memory log failing"))) }
                if state.holding { state.held.append(acknowledge) } else { return .success(acknowledge) }
                return .success({ })
            }
            let partition = record.partition >= 0 ? record.partition : Int32(abs((record.key ?? []).reduce(0) { $0 &* 31 &+ Int($1) }) % Int(count))
            let topicPartition = TopicPartition(topic: record.topic, partition: partition)
            var stored = record
            stored.partition = partition
            stored.offset = Int64(state.records[topicPartition]?.count ?? 0)
            stored.timestampMs = Int64(Date().timeIntervalSince1970 * 1000)
            state.records[topicPartition, default: []].append(stored)
            let position = (partition, stored.offset)
            let losing = state.losing
            let acknowledge: @Sendable () -> Void = {
                // Stored, but the acknowledgement never came (or the retry was refused).
                completion(losing.map { .failure($0) } ?? .success(position))
            }
            if state.holding {
                state.held.append(acknowledge)
                return .success({ })
            }
            return .success(acknowledge)
        }
        switch outcome {
        case .failure(let error): return error
        case .success(let acknowledge):
            acknowledgements.async(execute: acknowledge)
            return nil
        }
    }

    /// A reader of assigned partitions of this log.
    public final class Reader: LogReader, Sendable {
        private let log: InMemoryLog
        private let positions = Mutex<[TopicPartition: Int64]>([:])
        private let closed = Atomic<Bool>(false)

        public init(log: InMemoryLog) { self.log = log }

        public func poll(timeoutMs: Int32) -> KafkaConsumer.PollResult {
            let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
            repeat {
                let next = positions.withLock { positions -> KafkaRecord? in
                    for (partition, position) in positions.sorted(by: { $0.key.partition < $1.key.partition }) {
                        let records = log.records(partition.topic, partition: partition.partition)
                        let start = position < 0 ? 0 : position
                        if start < records.count {
                            positions[partition] = start + 1
                            return records[Int(start)]
                        }
                    }
                    return nil
                }
                if let next { return .record(next) }
                if closed.load(ordering: .relaxed) { return .none }
                Thread.sleep(forTimeInterval: 0.001)
            } while Date() < deadline
            return .none
        }

        public func addAssignment(_ offsets: [TopicPartition: Int64]) throws {
            positions.withLock { positions in
                for (partition, offset) in offsets { positions[partition] = offset < 0 ? 0 : offset }
            }
        }

        public func removeAssignment(_ partitions: [TopicPartition]) throws {
            positions.withLock { positions in
                for partition in partitions { positions[partition] = nil }
            }
        }

        public func assign(_ offsets: [TopicPartition: Int64]) throws { try addAssignment(offsets) }

        public func partitionCount(topic: String, timeoutMs: Int32) throws -> Int32 {
            guard let count = log.partitionCount(topic) else { throw KafkaError(message: "unknown topic \(topic)") }
            return count
        }

        public func close() { closed.store(true, ordering: .relaxed) }
    }

    public func partitionCount(_ topic: String) -> Int32? { state.withLock { $0.partitions[topic] } }
}
