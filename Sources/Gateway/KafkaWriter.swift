import Foundation
import KafkaClient
import Logging
import ServiceLifecycle
import Synchronization

/// The gateway's one Kafka producer (idempotent, acks=all) as a service: state records, dead letters, snapshot
/// requests and membership records all go through it. It is the first service started and the last stopped,
/// so that every other service can still write (and a request during shutdown gets an answer) while it
/// drains: on shutdown it flushes what is queued (bounded by `flushTimeout`), then closes.
///
/// A fatal producer error (e.g. the broker lost the idempotent producer's state: `UNKNOWN_PRODUCER_ID`) makes
/// librdkafka's producer unusable for good. It is then replaced by a fresh one, once per fatal error, logged
/// and counted (`pushgateway_kafka_clients_replaced_total{client="producer"}`); the old one's unsettled records
/// fail, and their writers write them again through the new one (``PartitionState`` repairs what it had
/// decided; the API answers the call again or 503).
final class KafkaWriter: Service, RecordSink, Sendable {
    private let properties: [String: String]
    private let flushTimeout: Duration
    private let health: KafkaHealth
    private let metrics: GatewayMetrics
    private let logger: Logger
    private let current = Mutex<KafkaProducer?>(nil)
    private let replacements = DispatchQueue(label: "kafka-producer-replacement")
    private let closed = Atomic<Bool>(false)

    init(properties: [String: String], flushTimeout: Duration, health: KafkaHealth, metrics: GatewayMetrics, logger: Logger) throws {
        self.properties = properties
        self.flushTimeout = flushTimeout
        self.health = health
        self.metrics = metrics
        self.logger = logger
        let producer = try makeProducer()
        current.withLock { $0 = producer }
    }

    private func makeProducer() throws -> KafkaProducer {
        try KafkaProducer(properties: properties, logger: logger) { [weak self] event in self?.handle(event) }
    }

    private func handle(_ event: ClientEvent) {
        switch event {
        case .fatal(let error): replace(after: error)
        case .allBrokersDown: health.brokersDown(client: "producer")
        case .error: break
        }
    }

    /// Replaces the producer (not on its own polling thread, which closing it joins).
    private func replace(after error: KafkaError) {
        health.producerReplacing(true)
        replacements.async { [self] in
            guard !closed.load(ordering: .relaxed) else { return }
            let fresh: KafkaProducer
            do {
                fresh = try makeProducer()
            } catch {
                logger.critical("cannot create a new Kafka producer", metadata: ["error": "\(error)"])
                return
            }
            let old = current.withLock { current -> KafkaProducer? in
                defer { current = fresh }
                return current
            }
            metrics.kafkaClientReplaced("producer")
            logger.error("Kafka producer replaced after a fatal error; its unsettled records are written again", metadata: ["error": "\(error)"])
            health.producerReplacing(false)
            old?.close(flushTimeoutMs: 0)
        }
    }

    func produce(
        _ record: KafkaRecord, completion: @escaping @Sendable (Result<(partition: Int32, offset: Int64), KafkaError>) -> Void
    ) -> KafkaError? {
        guard let producer = current.withLock({ $0 }) else { return KafkaError(message: "the producer is closed") }
        let health = self.health
        return producer.enqueue(record) { result in
            if case .success = result { health.reachable() }
            completion(result)
        }
    }

    func run() async throws {
        try? await gracefulShutdown()
        closed.store(true, ordering: .relaxed)
        let milliseconds = Int32(clamping: flushTimeout.components.seconds * 1000)
        let producer = current.withLock { $0 }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                producer?.close(flushTimeoutMs: milliseconds)
                continuation.resume()
            }
            thread.name = "kafka-producer-close"
            thread.start()
        }
        logger.debug("producer closed")
    }
}
