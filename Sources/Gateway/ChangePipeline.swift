import EventDecoding
import Foundation
import KafkaClient
import Logging
import PushCore
import ServiceLifecycle
import Synchronization

/// Consumes change events, matches them, and hands the notifications to the dispatcher.
///
/// A dedicated thread polls librdkafka (blocking calls stay off the cooperative pool), applies each event to
/// its app's index in log order, and passes the resulting deliveries to ``run()``'s task group, which sends
/// them concurrently. A record's offset is stored for commit only when all of its notifications have been
/// answered by the provider (or its dead-letter copy is acknowledged), so a crash re-delivers instead of
/// losing (at-least-once). Consumption pauses while too many records are in flight.
public final class ChangePipeline: Service, Sendable {
    struct Work: Sendable {
        var partition: TopicPartition
        var offset: Int64
        var deliveries: [Delivery]
        var eventTimestampMs: Int64
        /// Subscriptions the event removed (revocations) and shadows it changed: written to the state topic
        /// before the offset moves, so a restart neither resurrects the former nor loses the latter.
        var stateWrites: [StateRecord]
    }

    private let consumer: KafkaConsumer
    private let producer: KafkaProducer
    private let store: SubscriptionStore
    private let dispatcher: Dispatcher
    private let metrics: GatewayMetrics
    private let configuration: GatewayConfiguration.Kafka
    private let logger: Logger
    private let readiness: Readiness
    private let stateLog: StateLog
    private let ownership: Ownership

    private let trackers = Mutex<[TopicPartition: OffsetTracker]>([:])
    private let capacity: DispatchSemaphore
    private let stopping = Atomic<Bool>(false)
    private let partitionerWarned = Atomic<Bool>(false)

    init(
        consumer: KafkaConsumer, producer: KafkaProducer, store: SubscriptionStore, dispatcher: Dispatcher,
        metrics: GatewayMetrics, configuration: GatewayConfiguration.Kafka, readiness: Readiness, stateLog: StateLog,
        ownership: Ownership, logger: Logger
    ) {
        self.stateLog = stateLog
        self.ownership = ownership
        self.consumer = consumer
        self.producer = producer
        self.store = store
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.configuration = configuration
        self.readiness = readiness
        self.logger = logger
        self.capacity = DispatchSemaphore(value: configuration.maxInFlightRecords)
    }

    /// Rebalance hook (called on the polling thread before librdkafka applies the change).
    func rebalanced(_ event: RebalanceEvent) {
        switch event {
        case .assigned(let partitions):
            trackers.withLock { trackers in
                for partition in partitions where trackers[partition] == nil { trackers[partition] = OffsetTracker() }
            }
            readiness.assigned()
            ownership.assigned(partitions.filter { $0.topic == configuration.changesTopic }.map(\.partition))
        case .revoked(let partitions, let lost):
            ownership.revoked(partitions.filter { $0.topic == configuration.changesTopic }.map(\.partition))
            if !lost { drain(partitions, timeout: .seconds(30)) }
            trackers.withLock { trackers in
                for partition in partitions { trackers[partition] = nil }
            }
        }
    }

    public func run() async throws {
        let (stream, continuation) = AsyncStream<Work>.makeStream()
        // Matching needs every subscription: consume only once the state topic is loaded.
        await stateLog.waitUntilLoaded()
        guard stateLog.isLoaded else { return }
        let changesTopic = configuration.changesTopic
        let count = try await Task.detached { [consumer] in try consumer.partitionCount(topic: changesTopic, timeoutMs: 10_000) }.value
        ownership.setPartitionCount(count)
        try consumer.subscribe(topics: [configuration.changesTopic])
        let pollThread = Thread { [self] in
            pollLoop(continuation)
            continuation.finish()
        }
        pollThread.name = "kafka-consumer-poll"
        pollThread.start()
        logger.info("consuming", metadata: ["kafka.topic": "\(configuration.changesTopic)", "kafka.group": "\(configuration.groupId)"])

        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await work in stream {
                    group.addTask { await self.process(work) }
                }
            }
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
        }
        // The stream ended: the poll loop stopped and every delivery finished.
        await Task.detached { [consumer, producer, logger] in
            consumer.close()
            producer.close()
            logger.info("consumer closed, offsets committed")
        }.value
    }

    private func pollLoop(_ continuation: AsyncStream<Work>.Continuation) {
        while !stopping.load(ordering: .relaxed) {
            switch consumer.poll(timeoutMs: 100) {
            case .none:
                continue
            case .error(let error):
                logger.warning("consumer error", metadata: ["error": "\(error)"])
            case .record(let record):
                capacity.wait()
                metrics.inFlightRecords.increment()
                handle(record, continuation)
            }
        }
    }

    /// Decodes, matches and prepares one record. Consumer thread, log order.
    private func handle(_ record: KafkaRecord, _ continuation: AsyncStream<Work>.Continuation) {
        let partition = TopicPartition(topic: record.topic, partition: record.partition)
        trackers.withLock { $0[partition, default: OffsetTracker()].start(record.offset) }
        let event: ChangeEvent
        do {
            event = try EventDecoder.decode(
                value: record.value, contentType: record.header(EventDecoder.contentTypeHeader), key: record.key)
        } catch {
            deadLetter(record, reason: error.reason)
            return
        }
        let keyless = record.key?.isEmpty ?? true
        if keyless || record.partition != ownership.partition(of: event.app), !partitionerWarned.exchange(true, ordering: .relaxed) {
            logger.error(
                keyless
                    ? "record without a key: publishers must set the record key to the app id, so that an app's events share one partition and stay in order (docs/PUBLISHING.md); delivered anyway"
                    : "kafka.partitioner does not match the publishers': set it to their partitioner (murmur2_random for Java clients)",
                metadata: ["app": "\(event.app)", "kafka.partition": "\(record.partition)"])
        }
        guard let app = store.app(event.app), let profile = app.profile else {
            metrics.eventsSkipped.increment()
            finish(partition, record.offset)
            return
        }
        let now = Int64(Date().timeIntervalSince1970)
        let limit = profile.settings.shadowMaxBytes
        app.dataReplaced(at: event.path)
        var oversized: [DataPath] = []
        let (notifications, shadows) = app.withIndex { index in
            var notifications = index.apply(event, now: now)
            var shadows: [ShadowRecord] = []
            for (path, value) in index.changedShadows {
                let record = ShadowRecord(app: event.app, path: path, value: value)
                // A node whose data outgrew the app's limit loses its value/childEvent subscriptions: too_big.
                if record.encodedValue.count > limit {
                    // The device gets the revocation instead of this event's notification.
                    let removed = index.remove(index.dataSubscriptions(at: path))
                    let gone = Set(removed.map(\.subscriber))
                    notifications = notifications.compactMap { notification in
                        guard notification.path == path else { return notification }
                        var kept = notification
                        kept.recipients.removeAll { gone.contains($0.subscriber) }
                        return kept.recipients.isEmpty ? nil : kept
                    }
                    notifications += index.revocations(of: removed, reason: .tooBig)
                    oversized.append(path)
                } else {
                    shadows.append(record)
                }
            }
            return (notifications, shadows)
        }
        for path in oversized { app.markOversized(path) }
        metrics.eventsConsumed.increment()
        if !notifications.isEmpty { metrics.eventsMatched.increment() }
        let deliveries = dispatcher.prepare(profile: profile, notifications: notifications, origin: event.eventID)
        var stateWrites: [StateRecord] = shadows.map { .shadow($0) }
        for notification in notifications {
            guard case .revoke = notification.content else { continue }
            for recipient in notification.recipients {
                stateWrites.append(
                    .subscription(.deletion(app: event.app, path: notification.path, subscriber: recipient.subscriber)))
            }
        }
        if deliveries.isEmpty && stateWrites.isEmpty {
            finish(partition, record.offset)
            return
        }
        let timestamp = event.timestampMs > 0 ? event.timestampMs : (record.timestampMs ?? 0)
        continuation.yield(
            Work(partition: partition, offset: record.offset, deliveries: deliveries, eventTimestampMs: timestamp, stateWrites: stateWrites))
    }

    private func process(_ work: Work) async {
        // State writes and sends go out together; the offset moves when both are done (a failed send counts as
        // done once its retry is stored).
        async let stored: Bool = storeState(work.stateWrites)
        let settled = await withTaskGroup(of: Bool.self) { group in
            for delivery in work.deliveries {
                group.addTask {
                    let (outcome, ok) = await self.dispatcher.send(delivery)
                    if case .sent = outcome, work.eventTimestampMs > 0 {
                        let latency = Date().timeIntervalSince1970 - Double(work.eventTimestampMs) / 1000
                        self.metrics.latency.record(max(0, latency))
                    }
                    return ok
                }
            }
            return await group.reduce(true) { $0 && $1 }
        }
        if await stored, settled { finish(work.partition, work.offset) } else { releaseCapacity() }
    }

    /// False when shutdown came first (the event is then consumed and applied again after a restart).
    private func storeState(_ records: [StateRecord]) async -> Bool {
        if !records.isEmpty {
            // The offset must not move before the state is stored: retry until it is (or until shutdown, after
            // which the event is consumed and applied again).
            var delay = Duration.seconds(1)
            while true {
                do {
                    try await stateLog.write(records)
                    break
                } catch {
                    logger.error(
                        "state changes of an event not yet stored; retrying",
                        metadata: ["error": "\(error)", "retry.in": "\(delay)"])
                    guard (try? await Task.sleep(for: delay)) != nil, !stopping.load(ordering: .relaxed) else {
                        return false
                    }
                    delay = min(delay * 2, .seconds(30))
                }
            }
        }
        return true
    }

    private func deadLetter(_ record: KafkaRecord, reason: String) {
        metrics.deadLetter(category: reason.hasPrefix("undecodable") ? "undecodable" : "invalid")
        logger.warning(
            "record dead-lettered",
            metadata: ["kafka.partition": "\(record.partition)", "kafka.offset": "\(record.offset)", "reason": "\(reason)"])
        var headers = record.headers
        headers.append(KafkaHeader(name: "x-dlq-reason", string: reason))
        headers.append(KafkaHeader(name: "x-dlq-source-topic", string: record.topic))
        headers.append(KafkaHeader(name: "x-dlq-source-partition", string: String(record.partition)))
        headers.append(KafkaHeader(name: "x-dlq-source-offset", string: String(record.offset)))
        let copy = KafkaRecord(topic: configuration.deadLetterTopic, key: record.key, value: record.value, headers: headers)
        metrics.eventsDeadLettered.increment()
        writeDeadLetter(copy, source: TopicPartition(topic: record.topic, partition: record.partition), offset: record.offset)
    }

    /// The record's offset is finished only once its copy is acknowledged; until then the write is retried
    /// with backoff (the partition's commits wait, nothing is lost).
    private func writeDeadLetter(_ copy: KafkaRecord, source: TopicPartition, offset: Int64, delay: Double = 1) {
        producer.send(copy) { [self] error in
            guard let error else { return finish(source, offset) }
            if stopping.load(ordering: .relaxed) {
                logger.error("dead-letter write failed at shutdown; the record stays uncommitted", metadata: ["error": "\(error)"])
                return releaseCapacity()
            }
            logger.error("dead-letter write failed; retrying", metadata: ["error": "\(error)", "retry.in.seconds": "\(delay)"])
            DispatchQueue.global().asyncAfter(deadline: .now() + delay) {
                self.writeDeadLetter(copy, source: source, offset: offset, delay: min(delay * 2, 30))
            }
        }
    }

    private func finish(_ partition: TopicPartition, _ offset: Int64) {
        let position = trackers.withLock { trackers -> Int64? in
            guard trackers[partition] != nil else { return nil }
            return trackers[partition]?.finish(offset)
        }
        if let position { consumer.storeOffsets([partition: position]) }
        releaseCapacity()
    }

    private func releaseCapacity() {
        metrics.inFlightRecords.decrement()
        capacity.signal()
    }

    /// Waits (bounded) until the partitions' records in flight are finished, so their offsets are stored
    /// before the partitions go to another member.
    private func drain(_ partitions: [TopicPartition], timeout: Duration) {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let busy = trackers.withLock { trackers in partitions.contains { (trackers[$0]?.inFlight ?? 0) > 0 } }
            if !busy { return }
            Thread.sleep(forTimeInterval: 0.01)
        }
        logger.warning("revoked partitions still had records in flight", metadata: ["kafka.partitions": "\(partitions)"])
    }
}

/// What `/readyz` reports about the consumer: ready once the group has assigned it partitions (a member
/// given an empty set, because the group has more members than partitions, is ready too). Which partitions it
/// holds is ``Ownership``'s business.
public final class Readiness: Sendable {
    private let assignedOnce = Atomic<Bool>(false)

    public init() {}

    func assigned() { assignedOnce.store(true, ordering: .relaxed) }

    public var notReadyReason: String? {
        assignedOnce.load(ordering: .relaxed) ? nil : "waiting for the consumer group to assign partitions"
    }
}
