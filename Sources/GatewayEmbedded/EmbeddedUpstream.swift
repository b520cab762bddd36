import EventDecoding
import Foundation
import GatewayLogging
import KafkaClient
import Logging
import PushCore
import PushProto
import ServiceLifecycle
import Synchronization

/// Stands in for the upstream database service with the embedded defaults: reads every change event published
/// to the embedded broker into an ``EmbeddedDatabase`` and answers the gateway's snapshot requests with
/// `SNAPSHOT` events, as docs/PUBLISHING.md asks of a real upstream. So `value` and `childEvent` subscriptions
/// behave in the demo as they would in production (a `childEvent` subscription gets `added`/`removed`, not
/// `OnlyKeys`, after a write below its node).
///
/// A request is answered once every change partition has been read up to the high watermark seen when the
/// request was read, so the snapshot holds every write published before it. (A write published in the
/// milliseconds between that check and the snapshot lands before the snapshot in the log, and the snapshot
/// hides it from the shadow until the next write at or above the node; a real upstream orders its snapshots
/// with its own writes.)
///
/// Its consumer polls on a dedicated thread; it reads from the start of the topics and commits nothing.
public final class EmbeddedUpstream: Service, Sendable {
    private struct Request {
        var app: String
        var path: DataPath
        /// The next offset to read of each change partition before answering.
        var waitFor: [TopicPartition: Int64]
    }

    private let consumer: KafkaConsumer
    private let producer: KafkaProducer
    private let changesTopic: String
    private let requestsTopic: String
    private let partitions: Int32
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)

    /// `properties`: librdkafka's, shared by the gateway's clients; `partitioner`: the one the gateway's
    /// producers use, so that a snapshot lands in its app's partition.
    public init(
        brokers: String, properties: [String: String], partitioner: String, changesTopic: String, snapshotRequestsTopic: String,
        partitions: Int, logger: Logger
    ) throws {
        var properties = properties
        properties["bootstrap.servers"] = brokers
        properties["client.id"] = "push-gateway-embedded-upstream"
        var consumerProperties = properties
        consumerProperties["group.id"] = "push-gateway-embedded-upstream"  // never joins: partitions are assigned
        consumerProperties["enable.auto.commit"] = "false"
        consumerProperties["fetch.wait.max.ms"] = "50"
        var producerProperties = properties
        producerProperties["partitioner"] = partitioner
        consumer = try KafkaConsumer(properties: consumerProperties, logger: logger)
        producer = try KafkaProducer(properties: producerProperties, logger: logger)
        self.changesTopic = changesTopic
        requestsTopic = snapshotRequestsTopic
        self.partitions = Int32(partitions)
        self.logger = logger
    }

    public func run() async throws {
        var start: [TopicPartition: Int64] = [:]
        for partition in 0..<partitions {
            start[TopicPartition(topic: changesTopic, partition: partition)] = -2  // RD_KAFKA_OFFSET_BEGINNING
            start[TopicPartition(topic: requestsTopic, partition: partition)] = -2
        }
        try consumer.assign(start)
        logger.info("embedded upstream answering snapshot requests", metadata: [LoggingKeys.kafkaTopic: "\(requestsTopic)"])
        await withGracefulShutdownHandler {
            await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
                let thread = Thread { [self] in
                    pollLoop()
                    finished.resume()
                }
                thread.name = "embedded-upstream-poll"
                thread.start()
            }
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
        }
        await Task.detached { [consumer, producer] in
            consumer.close()
            producer.close(flushTimeoutMs: 2000)
        }.value
    }

    private func pollLoop() {
        var database = EmbeddedDatabase()
        var next: [TopicPartition: Int64] = [:]
        var requests: [Request] = []
        while !stopping.load(ordering: .relaxed) {
            switch consumer.poll(timeoutMs: 100) {
            case .record(let record) where record.topic == changesTopic:
                next[TopicPartition(topic: record.topic, partition: record.partition)] = record.offset + 1
                if let event = try? EventDecoder.decode(
                    value: record.value, contentType: record.header(EventDecoder.contentTypeHeader), key: record.key)
                {
                    database.apply(event)
                }
            case .record(let record):
                guard let request = try? Pushgateway_V1_SnapshotRequest(serializedBytes: record.value),
                    !request.appID.isEmpty, let path = try? DataPath(request.path)
                else { continue }
                requests.append(Request(app: request.appID, path: path, waitFor: highWatermarks()))
            case .error(let error):
                logger.debug("embedded upstream: consumer error", metadata: [LoggingKeys.error: "\(error)"])
            case .none:
                break
            }
            requests.removeAll { request in
                guard request.waitFor.allSatisfy({ next[$0.key, default: 0] >= $0.value }) else { return false }
                answer(request, with: database.value(app: request.app, at: request.path))
                return true
            }
        }
    }

    /// Where the change partitions end now. A partition whose end cannot be read is not waited for.
    private func highWatermarks() -> [TopicPartition: Int64] {
        var ends: [TopicPartition: Int64] = [:]
        for partition in 0..<partitions {
            let topicPartition = TopicPartition(topic: changesTopic, partition: partition)
            ends[topicPartition] = try? consumer.highWatermark(topicPartition, timeoutMs: 2000)
        }
        return ends
    }

    private func answer(_ request: Request, with value: JSONValue) {
        guard
            let bytes = try? EventDecoder.encode(
                app: request.app, path: request.path.description, operation: .snapshot, after: JSONWriter.string(value),
                before: nil, eventID: "embedded-snapshot-\(UUID().uuidString)",
                timestampMs: Int64(Date().timeIntervalSince1970 * 1000), json: false)
        else { return }
        let record = KafkaRecord(topic: changesTopic, key: Array(request.app.utf8), value: bytes)
        producer.send(record) { [logger] error in
            if let error {
                logger.warning(
                    "embedded upstream: snapshot not published",
                    metadata: [LoggingKeys.app: "\(request.app)", LoggingKeys.sp: "\(request.path)", LoggingKeys.error: "\(error)"])
            } else {
                logger.info("embedded upstream: snapshot published", metadata: [LoggingKeys.app: "\(request.app)", LoggingKeys.sp: "\(request.path)"])
            }
        }
    }
}
