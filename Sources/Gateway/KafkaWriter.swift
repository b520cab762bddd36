import Foundation
import KafkaClient
import Logging
import ServiceLifecycle

/// The gateway's one Kafka producer (idempotent, acks=all) as a service: state records, dead letters, snapshot
/// requests and membership records all go through it. It is the first service started and the last stopped,
/// so that every other service can still write (and a request during shutdown gets an answer) while it
/// drains: on shutdown it flushes what is queued (bounded by `flushTimeout`), then closes.
final class KafkaWriter: Service, RecordSink, Sendable {
    private let producer: KafkaProducer
    private let flushTimeout: Duration
    private let logger: Logger

    init(properties: [String: String], flushTimeout: Duration, logger: Logger) throws {
        self.producer = try KafkaProducer(properties: properties, logger: logger)
        self.flushTimeout = flushTimeout
        self.logger = logger
    }

    func produce(
        _ record: KafkaRecord, completion: @escaping @Sendable (Result<(partition: Int32, offset: Int64), KafkaError>) -> Void
    ) -> KafkaError? {
        producer.enqueue(record, completion: completion)
    }

    func run() async throws {
        try? await gracefulShutdown()
        let milliseconds = Int32(clamping: flushTimeout.components.seconds * 1000)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread { [producer] in
                producer.close(flushTimeoutMs: milliseconds)
                continuation.resume()
            }
            thread.name = "kafka-producer-close"
            thread.start()
        }
        logger.debug("producer closed")
    }
}
