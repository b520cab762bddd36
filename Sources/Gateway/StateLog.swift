import Foundation
import KafkaClient
import Logging
import PushCore
import ServiceLifecycle
import Synchronization

/// Where subscription changes go: the state topic in production, the store directly in unit tests.
public protocol SubscriptionWriter: Sendable {
    /// Returns once the records are durable and applied to this replica's store.
    func write(_ records: [StateRecord]) async throws(WriteError)
}

public struct WriteError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// Applies records to the store at once, without durability (tests, and tools that need no Kafka).
public struct InMemorySubscriptionWriter: SubscriptionWriter {
    let store: SubscriptionStore

    public init(store: SubscriptionStore) { self.store = store }

    public func write(_ records: [StateRecord]) async throws(WriteError) {
        for record in records { store.state(record.app).withIndex { record.apply(to: $0) } }
    }
}

/// The durable store of subscriptions and shadows: a compacted Kafka topic (`kafka.stateTopic`) of
/// ``StateRecord``s, the only stateful dependency. All records of an app go to one partition (chosen from the
/// app id), so an app's subscriptions and shadow checkpoints replay in the order they were written.
///
/// Every replica reads the whole topic from the beginning at start-up and keeps tailing it. To know when it
/// has read everything written before it started, it writes a load marker into every partition and counts
/// as loaded (``isLoaded``) once its tail has passed its own markers (broker watermarks are not relied on:
/// Tansu, the test broker, reports a high watermark of 1 for every partition). It holds every subscription, so every replica holds every subscription and a
/// so a rebalance costs no reload. A write is acknowledged by the broker (acks=all, idempotent producer) and
/// then waits until this replica's tail has applied it: the API answers only after the subscription is
/// both durable and live, and all replicas apply the same writes in the same (per-key) order.
public final class StateLog: Service, SubscriptionWriter, Sendable {
    private let consumer: KafkaConsumer
    private let producer: KafkaProducer
    private let topic: String
    private let store: SubscriptionStore
    private let logger: Logger
    private let applyTimeout: Duration
    private let ownership: Ownership
    private let metrics: GatewayMetrics?

    private struct State {
        /// Next offset to apply, per partition.
        var applied: [Int32: Int64] = [:]
        /// Offsets after this replica's load markers; emptied as the tail passes them.
        var loading: [Int32: Int64]? = nil
        var waiters: [UInt64: (partition: Int32, offset: Int64, continuation: CheckedContinuation<Bool, Never>)] = [:]
        var loadWaiters: [CheckedContinuation<Void, Never>] = []
        var nextWaiter: UInt64 = 0
        /// Partitions of the state topic, known once assigned.
        var partitions: Int32 = 0
    }

    private let state = Mutex(State())
    private let stopping = Atomic<Bool>(false)
    private let records = Atomic<Int>(0)
    private let retrySink = Mutex<(any RetrySink)?>(nil)

    /// Who keeps the pending retries read from the topic (set once, at start-up, before the load).
    func setRetrySink(_ sink: any RetrySink) { retrySink.withLock { $0 = sink } }

    init(consumer: KafkaConsumer, producer: KafkaProducer, topic: String, store: SubscriptionStore, ownership: Ownership,
         metrics: GatewayMetrics? = nil, logger: Logger, applyTimeout: Duration = .seconds(10)) {
        self.ownership = ownership
        self.metrics = metrics
        self.consumer = consumer
        self.producer = producer
        self.topic = topic
        self.store = store
        self.logger = logger
        self.applyTimeout = applyTimeout
    }

    public var isLoaded: Bool { state.withLock { $0.loading?.isEmpty ?? false } }

    /// Suspends until the start-up load is complete.
    public func waitUntilLoaded() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let loaded = state.withLock { state -> Bool in
                if state.loading?.isEmpty ?? false { return true }
                state.loadWaiters.append(continuation)
                return false
            }
            if loaded { continuation.resume() }
        }
    }

    public func run() async throws {
        let started = ContinuousClock.now
        let count = try await Task.detached { [self] in try assignAll() }.value
        let thread = Thread { [self] in tail() }
        thread.name = "kafka-state-tail"
        thread.start()
        try await writeLoadMarkers(partitions: count)
        await waitUntilLoadedOrShutdown()
        if isLoaded {
            logger.notice(
                "subscriptions loaded from the state topic",
                metadata: [
                    "kafka.topic": "\(topic)", "records": "\(records.load(ordering: .relaxed))",
                    "subscriptions": "\(store.counts().subscriptions)", "duration": "\(ContinuousClock.now - started)",
                ])
        }
        try? await gracefulShutdown()
        stopping.store(true, ordering: .relaxed)
        failAllWaiters()
    }

    private func waitUntilLoadedOrShutdown() async {
        await withGracefulShutdownHandler {
            await waitUntilLoaded()
        } onGracefulShutdown: { [self] in
            stopping.store(true, ordering: .relaxed)
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                defer { state.loadWaiters = [] }
                return state.loadWaiters
            }
            waiters.forEach { $0.resume() }
        }
    }

    /// The key of the load markers; the tail skips them. A marker carries no value, so compaction removes
    /// them (one key per partition, at most one live marker each).
    static let loadMarkerKey: [UInt8] = Array(#"["load-marker"]"#.utf8)

    /// Assigns every partition from the beginning. Blocking.
    private func assignAll() throws -> Int32 {
        let count = try consumer.partitionCount(topic: topic, timeoutMs: 10_000)
        var assignment: [TopicPartition: Int64] = [:]
        for partition in 0..<count { assignment[TopicPartition(topic: topic, partition: partition)] = -2 }  // beginning
        try consumer.assign(assignment)
        state.withLock { $0.partitions = count }
        logger.info("loading subscriptions", metadata: ["kafka.topic": "\(topic)", "kafka.partitions": "\(count)"])
        return count
    }

    /// Writes one marker per partition; the load is complete when the tail has applied past all of them.
    private func writeLoadMarkers(partitions count: Int32) async throws {
        var targets: [Int32: Int64] = [:]
        for partition in 0..<count {
            let position = try await producer.send(
                KafkaRecord(topic: topic, partition: partition, key: Self.loadMarkerKey, value: []))
            targets[partition] = position.offset + 1
        }
        let loadWaiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            for (partition, target) in targets where (state.applied[partition] ?? 0) >= target { targets[partition] = nil }
            state.loading = targets
            guard targets.isEmpty else { return [] }
            defer { state.loadWaiters = [] }
            return state.loadWaiters
        }
        loadWaiters.forEach { $0.resume() }
    }

    /// Applies state records as they arrive, on its own thread.
    private func tail() {
        while !stopping.load(ordering: .relaxed) {
            switch consumer.poll(timeoutMs: 100) {
            case .none: continue
            case .error(let error): logger.warning("state topic consumer error", metadata: ["error": "\(error)"])
            case .record(let record): apply(record)
            }
        }
        consumer.close()
    }

    private func apply(_ record: KafkaRecord) {
        if let key = record.key, key != Self.loadMarkerKey {
            records.add(1, ordering: .relaxed)
            do {
                let decoded = try StateRecord.decode(key: key, value: record.value.isEmpty ? nil : record.value)
                // The owner's in-memory shadows are newer than any checkpoint (it wrote them): checkpoints only
                // seed shadows at load and keep the other replicas ready to take over.
                if case .shadow = decoded, ownership.owns(app: decoded.app) {
                    return markApplied(record)
                }
                // Pending retries: the owner's queue is the newest copy; the others keep them for a takeover.
                if case .retry(let retry) = decoded {
                    if !ownership.owns(app: decoded.app) { retrySink.withLock { $0 }?.followed(retry) }
                    return markApplied(record)
                }
                // Apps without settings are indexed too: their subscriptions are served once settings appear.
                store.state(decoded.app).withIndex { index in decoded.apply(to: index) }
            } catch {
                metrics?.stateRecordUnreadable()
                logger.error(
                    "unreadable state record skipped",
                    metadata: ["kafka.partition": "\(record.partition)", "kafka.offset": "\(record.offset)", "error": "\(error)"])
            }
        }
        markApplied(record)
    }

    private func markApplied(_ record: KafkaRecord) {
        let next = record.offset + 1
        let (ready, loaded) = state.withLock { state -> ([CheckedContinuation<Bool, Never>], [CheckedContinuation<Void, Never>]) in
            state.applied[record.partition] = next
            var ready: [CheckedContinuation<Bool, Never>] = []
            for (id, waiter) in state.waiters where waiter.partition == record.partition && waiter.offset < next {
                ready.append(waiter.continuation)
                state.waiters[id] = nil
            }
            var loaded: [CheckedContinuation<Void, Never>] = []
            if var loading = state.loading, let target = loading[record.partition], next >= target {
                loading[record.partition] = nil
                state.loading = loading
                if loading.isEmpty {
                    loaded = state.loadWaiters
                    state.loadWaiters = []
                }
            }
            return (ready, loaded)
        }
        ready.forEach { $0.resume(returning: true) }
        loaded.forEach { $0.resume() }
    }

    /// Writes records durably and waits until this replica has applied them.
    public func write(_ records: [StateRecord]) async throws(WriteError) {
        var partitions = state.withLock { $0.partitions }
        if partitions == 0 {
            await waitUntilLoaded()
            partitions = state.withLock { $0.partitions }
        }
        guard partitions > 0 else { throw WriteError(description: "the state topic is not available") }
        for record in records {
            let position: (partition: Int32, offset: Int64)
            let partition = KeyPartitioner.consistentRandom.partition(of: Array(record.app.utf8), partitions: partitions)
            do {
                position = try await producer.send(
                    KafkaRecord(topic: topic, partition: partition, key: record.key, value: record.value ?? []))
            } catch {
                throw WriteError(description: "the state topic did not acknowledge the write: \(error)")
            }
            guard await applied(partition: position.partition, offset: position.offset) else {
                throw WriteError(description: "the write was acknowledged but not applied within \(applyTimeout)")
            }
        }
    }

    /// True once the record at `offset` of `partition` has been applied; false after the timeout.
    private func applied(partition: Int32, offset: Int64) async -> Bool {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let timeout = applyTimeout
        return await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                try? await Task.sleep(for: timeout)
                let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.continuation.resume(returning: false)
            }
            let result = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let done = state.withLock { state -> Bool in
                    if let next = state.applied[partition], next > offset { return true }
                    state.waiters[id] = (partition, offset, continuation)
                    return false
                }
                if done { continuation.resume(returning: true) }
            }
            group.cancelAll()
            return result
        }
    }

    private func failAllWaiters() {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            defer { state.waiters = [:] }
            return state.waiters.values.map(\.continuation)
        }
        waiters.forEach { $0.resume(returning: false) }
    }
}
