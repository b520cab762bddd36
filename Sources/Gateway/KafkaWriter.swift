import Foundation
import GatewayLogging
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
/// decided; the API answers the call again or 503). A record refused because the broker fenced the producer
/// (``KafkaError/fencesProducer``: Tansu does it for good after a timeout, without a fatal error) replaces it
/// the same way, once per producer. So is a producer that is stuck: every record it was given for
/// ``stuckAfter`` timed out, none was acknowledged, while Kafka could be reached (the consumer group answers).
/// A broker that lost the producer's state can leave librdkafka's idempotent producer that way, retrying for
/// ever without a fatal error.
/// `UNKNOWN_PRODUCER_ID` (librdkafka's `RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID`).
private let RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID_CODE: Int32 = 59

final class KafkaWriter: Service, RecordSink, Sendable {
    private let properties: [String: String]
    private let flushTimeout: Duration
    private let health: KafkaHealth
    private let metrics: GatewayMetrics
    private let logger: Logger
    private let current = Mutex<KafkaProducer?>(nil)
    private let replacements = DispatchQueue(label: "kafka-producer-replacement")
    private let closed = Atomic<Bool>(false)
    /// A replacement is under way: later errors of the same producer do not start another.
    private let replacing = Atomic<Bool>(false)
    /// Since when the current producer's records time out with none acknowledged (nil: the last one was).
    private let timingOutSince = Mutex<ContinuousClock.Instant?>(nil)
    /// How long a producer may time out every record while Kafka is reachable before it is replaced.
    let stuckAfter: Duration

    /// The gateway's timer service: a failed replacement is tried again on it, and every write retried until
    /// stored waits on it (``RecordSink/timers``).
    let timers: Timers

    init(
        properties: [String: String], flushTimeout: Duration, health: KafkaHealth, metrics: GatewayMetrics, timers: Timers, logger: Logger
    ) throws {
        self.timers = timers
        let timeoutMs = properties["message.timeout.ms"].flatMap(Int.init) ?? 60_000
        self.stuckAfter = max(.seconds(15), .milliseconds(3 * timeoutMs))
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
        case .fatal(let error): replaceOnce(after: error)
        case .allBrokersDown: health.brokersDown(client: "producer")
        case .error: break
        }
    }

    /// Replaces the producer (not on its own polling thread, which closing it joins), unless a replacement is
    /// under way already.
    private func replaceOnce(after error: KafkaError) {
        guard replacing.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        health.producerReplacing(true)
        replacements.async { [self] in replace(after: error, attempt: 0) }
    }

    /// Makes the new producer; when even that fails (a configuration librdkafka refuses now, no memory), tries again
    /// with backoff (1 s doubling to 30 s, on ``timers``) while the writer and the timers run: readiness says the
    /// producer is being replaced. The timers' shutdown ends a wait at once (nothing of the writer is held past it).
    private func replace(after cause: KafkaError, attempt: Int) {
        guard !closed.load(ordering: .relaxed), timers.isRunning else {
            replacing.store(false, ordering: .releasing)
            return
        }
        let fresh: KafkaProducer
        do {
            fresh = try makeProducer()
        } catch {
            let delay = min(30.0, Double(1 << min(attempt, 5)))
            logger.critical("cannot create a new Kafka producer; trying again", metadata: [LoggingKeys.error: "\(error)", LoggingKeys.retrySeconds: "\(delay)"])
            timers.schedule(after: delay) { [self] firing in
                guard firing == .due else { return replacing.store(false, ordering: .releasing) }
                replacements.async { [self] in replace(after: cause, attempt: attempt + 1) }
            }
            return
        }
        defer { replacing.store(false, ordering: .releasing) }
        let old = current.withLock { current -> KafkaProducer? in
            defer { current = fresh }
            return current
        }
        timingOutSince.withLock { $0 = nil }
        metrics.kafkaClientReplaced("producer")
        logger.error("Kafka producer replaced after a fatal error or fencing; its unsettled records are written again", metadata: [LoggingKeys.error: "\(cause)"])
        health.producerReplacing(false)
        old?.close(flushTimeoutMs: 0)
    }

    var isOpen: Bool { !closed.load(ordering: .relaxed) }

    func produce(
        _ record: KafkaRecord, completion: @escaping @Sendable (Result<(partition: Int32, offset: Int64), KafkaError>) -> Void
    ) -> KafkaError? {
        // Once closing, nothing is queued any more: a record queued after the close would never be reported
        // (a service cancelled with the others writes its last record then).
        guard !closed.load(ordering: .relaxed), let producer = current.withLock({ $0 }) else {
            return KafkaError(message: "the producer is closed")
        }
        let health = self.health
        // Not the producer itself: a delivery report must never hold its last reference (it runs on the
        // producer's polling thread, which its deinit joins).
        let id = ObjectIdentifier(producer)
        return producer.enqueue(record) { [weak self] result in
            switch result {
            case .success:
                health.reachable()
                self?.timingOutSince.withLock { $0 = nil }
            case .failure(let error) where error.fencesProducer: self?.fenced(id, error)
            case .failure(let error) where error.isTimeout: self?.timedOut(id, error)
            case .failure: break
            }
            completion(result)
        }
    }

    /// A record of producer `id` timed out: the producer is replaced if it is still the current one, its records
    /// have done nothing but time out for ``stuckAfter``, and Kafka can be reached meanwhile (during an outage
    /// a new producer would do no better).
    private func timedOut(_ id: ObjectIdentifier, _ error: KafkaError) {
        guard isCurrent(id) else { return }
        let now = ContinuousClock.now
        let stuck = timingOutSince.withLock { since -> Bool in
            guard let first = since else {
                since = now
                return false
            }
            return now - first >= stuckAfter
        }
        guard stuck, health.isReachable else { return }
        replaceOnce(after: KafkaError(
            code: error.code, message: "every record timed out for \(stuckAfter) while Kafka could be reached: \(error.message)"))
    }

    private func isCurrent(_ id: ObjectIdentifier) -> Bool {
        current.withLock { $0.map(ObjectIdentifier.init) == id }
    }

    /// The broker refused a record of producer `id` for its id or epoch: replaced, if it is still the current one.
    private func fenced(_ id: ObjectIdentifier, _ error: KafkaError) {
        guard isCurrent(id) else { return }
        replaceOnce(after: error)
    }

    func run() async throws {
        if let seconds = ProcessInfo.processInfo.environment["PUSH_TEST_FATAL_PRODUCER_AFTER_SECONDS"].flatMap(Double.init) {
            // Fault tests only: the broker's answer to a producer whose state it lost, injected once.
            Task { [self] in
                try await Task.sleep(for: .seconds(seconds))
                let producer = current.withLock { $0 }
                logger.warning("test: injecting a fatal producer error (PUSH_TEST_FATAL_PRODUCER_AFTER_SECONDS)")
                _ = producer?.injectFatalError(
                    code: RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID_CODE, reason: "injected by PUSH_TEST_FATAL_PRODUCER_AFTER_SECONDS")
            }
        }
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
