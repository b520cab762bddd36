import GatewayCore
import Foundation
import GatewayLogging
import KafkaClient
import Logging
import PushCore
import ServiceLifecycle
import Synchronization

/// The partitions of the state topic this replica holds, and the thread that reads them.
///
/// The state topic (`kafka.stateTopic`, compacted) is co-partitioned with the change topic: an app's records
/// go to the partition its events are in (the publishers' partitioner), so the owner of a change partition
/// owns exactly the state of that partition. A replica holds:
/// - the partitions it owns: read from the beginning when assigned (or promoted from a standby copy), up to a
///   load marker it writes itself (brokers' watermarks are not relied on: Tansu's undercount batches); after
///   that it is their only writer and stops reading them (``PartitionState``);
/// - standby copies of partitions owned elsewhere (`state.standbyReplicas`), kept current by reading on, so
///   that a takeover only has to catch up.
/// Memory is therefore about total × (1 + standbys) / replicas.
final class StateStore: Service, Sendable {
    private let consumer: any LogReader
    /// Reads back the gaps in an owner's offsets (``OwnershipFence``); only ever one range at a time.
    private let verifier: (any LogReader)?
    private let verifications = DispatchQueue(label: "kafka-state-verify")
    private let sink: any RecordSink
    let topic: String
    private let partitioner: KeyPartitioner
    private let metrics: GatewayMetrics
    private let health: KafkaHealth?
    /// The byte budgets; every partition's meter adds into its replica-wide total.
    let budget: StateBudget
    /// Milliseconds allowed to read the topic's metadata at start-up.
    private let startupTimeout: Int32
    private let logger: Logger

    /// A load in progress: the marker offset it waits for the log to pass.
    private struct Load {
        var generation: UInt64
        var target: Int64
        var waiter: CheckedContinuation<Bool, Never>?
    }

    /// What the store tells the others (set once they exist, before any partition is made).
    private struct Listeners {
        var fenced: @Sendable (Int32) -> Void = { _ in }
        var rewriteRetryLine: @Sendable (RetryKey) -> Void = { _ in }
        var releaseTicket: @Sendable (UInt64) -> Void = { _ in }
        var subscriptionEnded: @Sendable (EndedSubscription) -> Void = { _ in }
    }
    /// Nil until ``listen(fenced:rewriteRetryLine:releaseTicket:subscriptionEnded:)``. Read once per partition
    /// made: each partition's hooks hold the closures themselves, so releasing a ticket (once per change record)
    /// takes no lock that every partition shares.
    private let listeners = Mutex<Listeners?>(nil)

    /// The partitions held, each behind its own lock (a copy of `State.partitions`, written with it under the
    /// store's lock): the event path and the delivery lanes find a partition without the lock every partition shares.
    private let directory = PartitionStripes<PartitionState>()

    private struct State {
        /// Changed only through ``setPartition(_:_:directory:)``, which keeps the directory in step.
        private(set) var partitions: [Int32: PartitionState] = [:]

        mutating func setPartition(_ index: Int32, _ partition: PartitionState?, directory: PartitionStripes<PartitionState>) {
            partitions[index] = partition
            directory.withLock(index) { $0 = partition }
        }
        var loads: [Int32: Load] = [:]
        /// Bumped by every load and release of a partition: a load whose generation is not the latest is stale
        /// (the partition was given up, or assigned again, meanwhile) and ends without effect.
        var generations: [Int32: UInt64] = [:]
        /// Partitions whose last load did not fit the byte budget (the one it would pass): not served, tried again.
        var overBudget: [Int32: StateBudget.Refusal] = [:]
        var partitionCount: Int32 = 0
        var countWaiters: [CheckedContinuation<Int32, Never>] = []
        /// The count will never be known (the start failed or was stopped): waiters get 0 at once.
        var countAbandoned = false
    }

    private let state = Mutex(State())
    private let stopping = Atomic<Bool>(false)
    /// Assignment changes of the reader: blocking librdkafka calls, serialised here, off the cooperative pool.
    private let assignments = DispatchQueue(label: "kafka-state-assignments")
    private let recordsRead = Atomic<Int>(0)
    /// The partition count once known, read without the lock: every lookup of an app's partition reads it, from
    /// under other locks (the delivery service's), so it must never wait for this store's lock.
    private let knownCount = Atomic<Int32>(0)

    /// The key of load markers; a marker carries no value, so compaction removes it.
    static let loadMarkerKey: [UInt8] = OwnerTag.loadMarkerKey

    init(
        consumer: any LogReader, verifier: (any LogReader)? = nil, sink: any RecordSink, topic: String, partitioner: KeyPartitioner,
        metrics: GatewayMetrics, health: KafkaHealth? = nil, startupTimeout: Duration = .seconds(30), budget: StateBudget = StateBudget(),
        logger: Logger
    ) {
        _ = StallWatch.shared
        self.verifier = verifier
        self.health = health
        self.budget = budget
        self.startupTimeout = Int32(clamping: startupTimeout.components.seconds * 1000)
        self.consumer = consumer
        self.sink = sink
        self.topic = topic
        self.partitioner = partitioner
        self.metrics = metrics
        self.logger = logger
    }

    /// Who hears that this replica was superseded in a partition, who rewrites a pending-retry line, who
    /// releases a change event's ticket (``EventTickets``), and who hears of ended subscriptions (the event hook).
    func listen(
        fenced: @escaping @Sendable (Int32) -> Void = { _ in }, rewriteRetryLine: @escaping @Sendable (RetryKey) -> Void = { _ in },
        releaseTicket: @escaping @Sendable (UInt64) -> Void, subscriptionEnded: @escaping @Sendable (EndedSubscription) -> Void = { _ in }
    ) {
        listeners.withLock {
            $0 = Listeners(
                fenced: fenced, rewriteRetryLine: rewriteRetryLine, releaseTicket: releaseTicket, subscriptionEnded: subscriptionEnded)
        }
    }

    private func makePartition(_ index: Int32, role: PartitionRole) -> PartitionState {
        let listening = listeners.withLock { $0 }
        assert(listening != nil, "StateStore.listen must be called before a partition is made")
        let listeners = listening ?? Listeners()
        let hooks = PartitionHooks(
            readRange: { [self] partition, from, to in readRange(partition: partition, from: from, to: to) },
            fenced: listeners.fenced, rewriteRetryLine: listeners.rewriteRetryLine, releaseTicket: listeners.releaseTicket,
            subscriptionEnded: listeners.subscriptionEnded, metrics: metrics)
        return PartitionState(
            partition: index, topic: topic, role: role, sink: sink, hooks: hooks, logger: logger, bytes: budget.partitionMeter())
    }

    /// The records of state partition `partition` at offsets `from..<to`, read by the verifier (blocking, at most
    /// 5 s); nil when they cannot be read now. Without a verifier (unit tests over the in-memory log, which has
    /// no other writer), nothing is found.
    private func readRange(partition: Int32, from: Int64, to: Int64) -> [KafkaRecord]? {
        guard let verifier else { return [] }
        return verifications.sync {
            let topicPartition = TopicPartition(topic: topic, partition: partition)
            do {
                try verifier.addAssignment([topicPartition: from])
            } catch {
                return nil
            }
            defer { try? verifier.removeAssignment([topicPartition]) }
            var records: [KafkaRecord] = []
            let deadline = ContinuousClock.now + .seconds(5)
            while ContinuousClock.now < deadline {
                guard case .record(let record) = verifier.poll(timeoutMs: 100) else { continue }
                guard record.topic == topic, record.partition == partition else { continue }
                if record.offset >= to { return records }
                if record.offset >= from { records.append(record) }
            }
            return nil
        }
    }

    // MARK: Lookup

    /// Partitions of the state topic (0 until known).
    var partitionCount: Int32 { knownCount.load(ordering: .acquiring) }

    /// Waits until the partition count is known.
    func waitForPartitionCount() async -> Int32 {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let count = state.withLock { state -> Int32? in
                if state.partitionCount > 0 { return state.partitionCount }
                if state.countAbandoned { return 0 }
                state.countWaiters.append(continuation)
                return nil
            }
            if let count { continuation.resume(returning: count) }
        }
    }

    /// The partition `app`'s state and events are in (-1 while the count is unknown).
    func partitionIndex(ofApp app: String) -> Int32 {
        let count = partitionCount
        return count > 0 ? partitioner.partition(of: Array(app.utf8), partitions: count) : -1
    }

    func partition(_ index: Int32) -> PartitionState? { directory.withLock(index) { $0 } }

    /// The partition of `app` when this replica owns it and has loaded it.
    func ownedPartition(ofApp app: String) -> PartitionState? {
        let index = partitionIndex(ofApp: app)
        guard let partition = partition(index), partition.role == .owner else { return nil }
        return partition
    }

    /// The partition of `app` when this replica may answer for it: owned and loaded (each answer then checks that
    /// the ownership is current).
    func servingPartition(ofApp app: String) -> PartitionState? { ownedPartition(ofApp: app) }

    /// The partition of `app` when this replica owns it or is finishing its work before handing it over.
    func activePartition(ofApp app: String) -> PartitionState? {
        guard let partition = partition(partitionIndex(ofApp: app)), partition.role.isActive else { return nil }
        return partition
    }

    /// Every partition held, with its role.
    var held: [(partition: Int32, role: PartitionRole)] {
        state.withLock { $0.partitions.map { ($0.key, $0.value.role) } }.sorted { $0.partition < $1.partition }
    }

    var ownedPartitions: [PartitionState] {
        state.withLock { Array($0.partitions.values) }.filter { $0.role == .owner }.sorted { $0.partition < $1.partition }
    }

    // MARK: Service

    func run() async throws {
        let count: Int32
        do {
            // Asked again every second while no broker answers, so that a shutdown (SIGTERM during a start that
            // cannot succeed) is heard within a second; a broker's answer (no such topic) ends it at once.
            count = try await withTaskCancellationHandler {
              try await withGracefulShutdownHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
                    let thread = Thread { [self] in
                        let deadline = ContinuousClock.now + .milliseconds(startupTimeout)
                        while true {
                            let attempt = ContinuousClock.now
                            let left = Int32(clamping: Int64(max(0, (deadline - attempt).seconds * 1000)))
                            do {
                                return continuation.resume(returning: try consumer.partitionCount(topic: topic, timeoutMs: min(left, 1000)))
                            } catch let error as KafkaError where error.isUnreachable && left > 1000 {
                                if stopping.load(ordering: .relaxed) { return continuation.resume(throwing: CancellationError()) }
                                if ContinuousClock.now - attempt < .milliseconds(200) { Thread.sleep(forTimeInterval: 0.2) }
                            } catch {
                                return continuation.resume(throwing: error)
                            }
                        }
                    }
                    thread.name = "kafka-state-metadata"
                    thread.start()
                }
              } onGracefulShutdown: { [self] in
                stopping.store(true, ordering: .relaxed)
              }
            } onCancel: { [self] in
                stopping.store(true, ordering: .relaxed)
            }
        } catch is CancellationError {
            // Stopped before the start was over: not a failure.
            abandonCount()
            return
        } catch {
            // Nobody waits for the count any more (nor will: a service may ask after this): the start failed.
            abandonCount()
            throw StartupError(
                "cannot read the state topic '\(topic)' from Kafka within \(startupTimeout / 1000) s (kafka.startupTimeoutSeconds): \(error)")
        }
        let waiters = state.withLock { state -> [CheckedContinuation<Int32, Never>] in
            state.partitionCount = count
            knownCount.store(count, ordering: .releasing)
            defer { state.countWaiters = [] }
            return state.countWaiters
        }
        waiters.forEach { $0.resume(returning: count) }
        logger.info("state topic", metadata: [LoggingKeys.kafkaTopic: "\(topic)", LoggingKeys.kafkaPartitions: "\(count)"])
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let thread = Thread { [self] in
                        tail()
                        continuation.resume()
                    }
                    thread.name = "kafka-state-tail"
                    thread.start()
                }
            } onGracefulShutdown: { [self] in
                stopping.store(true, ordering: .relaxed)
            }
        } onCancel: { [self] in
            stopping.store(true, ordering: .relaxed)
        }
        failLoads()
    }

    /// The count will not be waited for (the start failed, or a shutdown came first): every wait ends with 0.
    func abandonCount() {
        let waiters = state.withLock { state -> [CheckedContinuation<Int32, Never>] in
            state.countAbandoned = true
            defer { state.countWaiters = [] }
            return state.countWaiters
        }
        waiters.forEach { $0.resume(returning: 0) }
    }

    /// Most records taken from the reader at once: what librdkafka has fetched already, up to this many.
    static let batchLimit = 4096

    /// Most groups of records (one partition's records of one batch) handed to the workers and not applied yet.
    static let groupsInFlight = 8

    /// Reads the held partitions that are loading or standby, on its own thread. Records are taken in batches
    /// (what the reader has fetched already) and handed to the workers partition by partition (``PartitionWorkers``,
    /// as the change records are matched: partition p always on worker p mod cores, so each partition's records keep
    /// their order while different partitions are applied in parallel). The thread does not wait for a batch to be
    /// applied (librdkafka hands out one partition's fetch at a time: batches are mostly of one partition), only
    /// when `groupsInFlight` groups are waiting.
    private func tail() {
        let limiter = LogLimiter()
        let workers = PartitionWorkers(count: 0, label: "state-worker", maxQueued: Self.groupsInFlight)
        while !stopping.load(ordering: .relaxed) {
            var timeout: Int32 = 100
            // Grouped by partition as they are taken (each record moved once, not copied into a batch first).
            var byPartition: [Int32: [KafkaRecord]] = [:]
            var taken = 0
            taking: while taken < Self.batchLimit {
                switch consumer.poll(timeoutMs: timeout) {
                case .none:
                    break taking
                case .error(let error):
                    if case .log(let suppressed) = limiter.decide(facility: "\(error.code)") {
                        logger.warning("state topic consumer error", metadata: [LoggingKeys.error: "\(error)", LoggingKeys.suppressed: "\(suppressed)"])
                    }
                    break taking
                case .record(let record):
                    taken += 1
                    if record.topic == topic { byPartition[record.partition, default: []].append(record) }
                    timeout = 0
                }
            }
            guard taken > 0 else { continue }
            health?.reachable()
            for (index, records) in byPartition {
                // The partition as it is now, when its records were read: records of an assignment given up meanwhile
                // never reach a copy loaded again later.
                guard let partition = partition(index), partition.role.isRead else { continue }
                workers.run(on: index) { [self] in apply(records, to: partition) }
            }
        }
        workers.barrier()
        consumer.close()
    }

    /// Applies one partition's records of a batch, in order, while the store still reads the partition. The load
    /// waiting for the log to pass its marker is checked at each marker and after the last record, not after every
    /// record (the store's lock is shared with the workers applying other partitions).
    private func apply(_ records: [KafkaRecord], to partition: PartitionState) {
        var unchecked: Int64?
        for record in records {
            guard partition.role.isRead else { break }
            switch apply(record, to: partition) {
            case .gaveUp:
                return
            case .marker:
                passed(partition, end: record.offset + 1)
                unchecked = nil
            case .applied:
                unchecked = record.offset + 1
            }
        }
        if let unchecked { passed(partition, end: unchecked) }
    }

    private enum Applied {
        case applied, marker, gaveUp
    }

    private func apply(_ record: KafkaRecord, to partition: PartitionState) -> Applied {
        let tag = OwnerTag.of(record)
        if record.key == OwnerTag.loadMarkerKey {
            partition.readMarker(tag: tag, offset: record.offset)
            return .marker
        } else if let key = record.key, key != OwnerTag.ownerCheckKey {
            recordsRead.add(1, ordering: .relaxed)
            do {
                // Decoded from the record's own bytes (no copy of key or value).
                let decoded = try key.withUnsafeBufferPointer { key in
                    try record.value.withUnsafeBufferPointer { value in
                        try StateRecord.decode(key: key, value: value.isEmpty ? nil : value)
                    }
                }
                if !partition.applyFromLog(decoded, key: key, offset: record.offset, tag: tag) {
                    metrics.zombieRecordsSkipped()
                }
                if let refusal = budget.refusal(adding: 0, partition: partition.bytes) {
                    giveUpOverBudget(record.partition, partition, refusal)
                    return .gaveUp
                }
            } catch {
                metrics.stateRecordUnreadable()
                logger.error(
                    "unreadable state record skipped",
                    metadata: [LoggingKeys.kafkaPartition: "\(record.partition)", LoggingKeys.kafkaOffset: "\(record.offset)", LoggingKeys.error: "\(error)"])
                partition.advanceLogEnd(to: record.offset + 1)
            }
        } else {
            partition.advanceLogEnd(to: record.offset + 1)
        }
        return .applied
    }

    /// The log of `partition` was read up to `end`: a load of it waiting for its marker to be passed ends.
    private func passed(_ partition: PartitionState, end: Int64) {
        let index = partition.partition
        let ready = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard state.partitions[index] === partition, let load = state.loads[index], end >= load.target, let waiter = load.waiter
            else { return nil }
            state.loads[index]?.waiter = nil
            return waiter
        }
        ready?.resume(returning: true)
    }

    /// A partition being read passed a byte budget: what was read is dropped (memory comes back as its indexes go),
    /// the load ends without the partition (its apps answer 503, its events wait unconsumed), and it is said
    /// loudly. A standby copy is dropped the same way (it is optional). The owner tries again later
    /// (``ChangeConsumer``).
    private func giveUpOverBudget(_ index: Int32, _ partition: PartitionState, _ refusal: StateBudget.Refusal) {
        let (waiter, dropped) = state.withLock { state -> (CheckedContinuation<Bool, Never>?, Bool) in
            guard state.partitions[index] === partition else { return (nil, false) }
            state.setPartition(index, nil, directory: directory)
            state.generations[index] = (state.generations[index] ?? 0) + 1
            if partition.role == .loading { state.overBudget[index] = refusal }
            return (state.loads.removeValue(forKey: index)?.waiter, true)
        }
        guard dropped else { return }
        let role = partition.role
        partition.setRole(.released)
        waiter?.resume(returning: false)
        change { try $0.removeAssignment([TopicPartition(topic: self.topic, partition: index)]) }
        logger.critical(
            role == .loading
                ? "a state partition does not fit this replica's memory budget: not served (its apps answer 503, its events wait); add replicas or memory, or lower the apps' quotas.maxStateBytes"
                : "a standby copy does not fit this replica's memory budget: dropped",
            metadata: [
                LoggingKeys.kafkaPartition: "\(index)", LoggingKeys.budget: "\(refusal.quota)", LoggingKeys.stateBytes: "\(budget.replica.bytes)",
            ])
    }

    /// The budget partition `index`'s last load would have passed, when it did not fit.
    func overBudget(_ index: Int32) -> StateBudget.Refusal? { state.withLock { $0.overBudget[index] } }

    /// Partitions not served because they do not fit the byte budget.
    var partitionsOverBudget: [Int32] { state.withLock { $0.overBudget.keys.sorted() } }

    private func failLoads() {
        let waiters = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            defer { state.loads = [:] }
            return state.loads.values.compactMap(\.waiter)
        }
        waiters.forEach { $0.resume(returning: false) }
    }

    // MARK: Ownership changes

    /// Loads partition `index` for ownership: promotes the standby copy, or reads the partition from the
    /// beginning, up to a load marker written now with a fresh owner tag (from then on, records of any earlier
    /// owner are superseded: ``OwnershipFence``). Returns the partition, still in the `loading` role (the caller
    /// promotes it), or nil when it was given up or assigned again meanwhile (each load has a generation; only the
    /// latest one may finish), or the store stopped.
    func load(_ index: Int32) async -> PartitionState? {
        let started = ContinuousClock.now
        let (partition, tailFrom, generation) = state.withLock { state -> (PartitionState, Int64?, UInt64) in
            let generation = (state.generations[index] ?? 0) + 1
            state.generations[index] = generation
            state.overBudget[index] = nil
            // A load still waiting for its marker is superseded by this one.
            state.loads[index]?.waiter?.resume(returning: false)
            state.loads[index] = nil
            if let existing = state.partitions[index], existing.role != .released {
                // A standby (or a load in progress) is read already; an owned copy is read on from its end.
                let tailed = existing.role == .standby || existing.role == .loading
                return (existing, tailed ? nil : existing.logEnd, generation)
            }
            let partition = makePartition(index, role: .loading)
            state.setPartition(index, partition, directory: directory)
            return (partition, -2, generation)
        }
        // Outside the store's lock: it is never held while a partition's lock is taken (docs/ARCHITECTURE.md,
        // "Locks"). A release meanwhile makes this load stale (its generation).
        partition.setRole(.loading)
        @Sendable func current() -> Bool {
            !stopping.load(ordering: .relaxed) && partition.role == .loading
                && state.withLock { $0.partitions[index] === partition && $0.generations[index] == generation }
        }
        let fromStart = tailFrom == -2
        let topicPartition = TopicPartition(topic: topic, partition: index)
        if let tailFrom {
            do {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    assignments.async { [consumer] in
                        continuation.resume(with: Result { try consumer.addAssignment([topicPartition: tailFrom]) })
                    }
                }
            } catch {
                logger.error("cannot read a state partition", metadata: [LoggingKeys.kafkaPartition: "\(index)", LoggingKeys.error: "\(error)"])
                return nil
            }
        }
        // The marker is written until it is stored (an outage only delays the load), or the load is abandoned.
        let tag = OwnerTag.make()
        partition.willWriteMarker(tag: tag)
        // An owned copy loaded again (the group assigned it again): its writes in flight land before the new marker.
        if tailFrom != nil, tailFrom != -2 {
            _ = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                DispatchQueue.global().async { continuation.resume(returning: partition.waitForWrites(timeout: .seconds(5))) }
            }
        }
        let writtenAt = Uptime.now
        let record = KafkaRecord(
            topic: topic, partition: index, key: OwnerTag.loadMarkerKey, value: [], headers: [KafkaHeader(name: OwnerTag.header, value: tag)])
        let written = await withCheckedContinuation { (continuation: CheckedContinuation<Int64?, Never>) in
            sink.produceUntilStored(
                record, delay: 0.5, maxDelay: 10, while: current,
                failed: { [logger] error, _ in
                    logger.warning("load marker not written yet; retrying", metadata: [LoggingKeys.kafkaPartition: "\(index)", LoggingKeys.error: "\(error)"])
                }, done: { continuation.resume(returning: $0) })
        }
        guard let marker = written else { return nil }
        guard current() else { return nil }
        partition.markerWritten(tag: tag, offset: marker, writtenAt: writtenAt)
        let loaded = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let done = state.withLock { state -> Bool? in
                guard state.generations[index] == generation, !stopping.load(ordering: .relaxed) else { return false }
                if partition.logEnd > marker { return true }
                state.loads[index] = Load(generation: generation, target: marker + 1, waiter: continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
        // Only the latest load of the partition takes the reader's assignment away.
        guard loaded, current() else { return nil }
        change { try $0.removeAssignment([topicPartition]) }
        logger.notice(
            "state partition loaded",
            metadata: [
                LoggingKeys.kafkaPartition: "\(index)", LoggingKeys.subscriptions: "\(partition.subscriptionCount)",
                LoggingKeys.from: "\(fromStart ? "log" : "standby")", LoggingKeys.duration: "\(ContinuousClock.now - started)",
                LoggingKeys.ownerTag: "\(OwnerTag.hex(tag))",
            ])
        metrics.stateLoaded(seconds: (ContinuousClock.now - started).seconds)
        return partition
    }

    /// Whether `partition` is the one the latest load of `index` produced (a caller promoting it checks first).
    func isCurrent(_ partition: PartitionState, index: Int32) -> Bool {
        directory.withLock(index) { $0 === partition }
    }

    /// Gives partition `index` up as owner: keeps it as a standby copy (reading on from where the log was
    /// left) or drops it. A load in progress ends without effect.
    func release(_ index: Int32, keepAsStandby: Bool) {
        let dropped = state.withLock { state -> (PartitionState, Bool, Bool, CheckedContinuation<Bool, Never>?)? in
            state.generations[index] = (state.generations[index] ?? 0) + 1
            state.overBudget[index] = nil
            let waiter = state.loads.removeValue(forKey: index)?.waiter
            guard let partition = state.partitions[index] else { return nil }
            let tailed = partition.role == .loading || partition.role == .standby
            if !keepAsStandby { state.setPartition(index, nil, directory: directory) }
            return (partition, keepAsStandby, tailed, waiter)
        }
        guard let (partition, standby, tailed, waiter) = dropped else { return }
        partition.setRole(standby ? .standby : .released)
        waiter?.resume(returning: false)
        let topicPartition = TopicPartition(topic: topic, partition: index)
        if standby, !tailed {
            let end = partition.logEnd
            change { try $0.addAssignment([topicPartition: end]) }
        } else if !standby, tailed {
            change { try $0.removeAssignment([topicPartition]) }
        }
    }

    /// Keeps standby copies of `indexes` (partitions not held yet start as standbys, read from the beginning)
    /// and drops the standby copies of the others.
    func setStandbys(_ indexes: Set<Int32>) {
        var dropped: [PartitionState] = []
        let (added, removed) = state.withLock { state -> ([PartitionState], [Int32]) in
            var added: [PartitionState] = []
            var removed: [Int32] = []
            for index in indexes where state.partitions[index] == nil {
                let partition = makePartition(index, role: .standby)
                state.setPartition(index, partition, directory: directory)
                added.append(partition)
            }
            for (index, partition) in state.partitions where partition.role == .standby && !indexes.contains(index) {
                state.setPartition(index, nil, directory: directory)
                removed.append(index)
                dropped.append(partition)
            }
            return (added, removed)
        }
        for partition in dropped { partition.setRole(.released) }
        if !added.isEmpty {
            let offsets = Dictionary(uniqueKeysWithValues: added.map { (TopicPartition(topic: topic, partition: $0.partition), Int64(-2)) })
            change { try $0.addAssignment(offsets) }
            logger.info("standby copies added", metadata: [LoggingKeys.kafkaPartitions: "\(added.map(\.partition).sorted())"])
        }
        if !removed.isEmpty {
            let partitions = removed.map { TopicPartition(topic: topic, partition: $0) }
            change { try $0.removeAssignment(partitions) }
            logger.info("standby copies dropped", metadata: [LoggingKeys.kafkaPartitions: "\(removed.sorted())"])
        }
    }

    /// Changes the reader's assignment on the assignment queue (in order with the others), without waiting.
    private func change(_ body: @escaping @Sendable (any LogReader) throws -> Void) {
        assignments.async { [consumer, logger] in
            do {
                try body(consumer)
            } catch {
                logger.warning("state topic assignment not changed", metadata: [LoggingKeys.error: "\(error)"])
            }
        }
    }

    /// Subscriptions held, by role (for the gauges).
    func counts() -> (owned: Int, standby: Int, shadowsKept: Int) {
        var owned = 0
        var standby = 0
        var shadows = 0
        for partition in state.withLock({ Array($0.partitions.values) }) {
            let (role, subscriptions, kept) = partition.withContents { contents in
                (contents.role, contents.subscriptionCount, contents.apps.values.reduce(0) { $0 + $1.index.shadowCounts().kept })
            }
            switch role {
            case .owner, .loading, .releasing: owned += subscriptions
            case .standby: standby += subscriptions
            case .released: break
            }
            if role == .owner { shadows += kept }
        }
        return (owned, standby, shadows)
    }
}

extension PartitionRole {
    /// Whether the store reads the partition's log (loading it, or keeping a standby copy).
    fileprivate var isRead: Bool { self == .loading || self == .standby }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
