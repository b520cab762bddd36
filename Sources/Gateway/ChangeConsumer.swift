import Foundation
import GatewayLogging
import KafkaClient
import Logging
import ServiceLifecycle
import Synchronization

/// The consumer-group member for the change topic: which partitions this replica owns, and the thread that
/// consumes them (``EventProcessor``).
///
/// - Assigned a partition: its fetching is paused, its state is loaded (or its standby copy promoted) by the
///   ``StateStore``, what the previous owner left to deliver is adopted, and only then is it resumed: no
///   event is matched against a partial state.
/// - Revoked: the partition stops being served at once, its records in flight get a bounded time to finish
///   (so their offsets are committed), its writes in flight are acknowledged, and its state is dropped or kept
///   as a standby copy.
/// Ownership (owned and loaded partitions) is published to the other replicas through ``Membership``.
final class ChangeConsumer: Service, Sendable {
    private let consumer: KafkaConsumer
    private let topic: String
    /// The user-notifications topic: its partition p is assigned, paused, resumed and revoked with change partition p
    /// (``KafkaClient/KafkaConsumer`` companions), so the owner of an app's state also sends its user notifications.
    private let companion: String?
    private let store: StateStore
    private let processor: EventProcessor
    /// Where the records are matched, a partition always on the same thread (``PartitionWorkers``).
    private let workers: PartitionWorkers
    private let delivery: DeliveryService
    private let tickets: EventTickets
    private let ledger: OffsetLedger
    /// Why each partition is not fetched (loading here, its budget in the ledger): fetched only when nothing holds it.
    private let pauses: FetchPauses
    private let membership: Membership
    private let health: Health
    private let sweeper: RevocationSweeper
    private let drainTimeout: Duration
    /// How long a superseded partition may stay in the group's assignment, with no rebalance, before this replica
    /// takes it back.
    private let takeBackAfter: Duration
    /// How long a partition that did not fit the byte budget waits before it is loaded again.
    private let overBudgetRetry: Duration
    /// The gateway's timer service: the retries of a partition over its budget and the take-backs wait on it.
    private let timers: Timers
    private let logger: Logger

    /// Loads requested by the rebalance callback, run by `run()`'s task group.
    private let loads = Mutex<AsyncStream<Int32>.Continuation?>(nil)
    /// What this replica owns and has loaded (read by `/readyz`, the membership record and the router).
    private let ownership: PartitionOwnership
    private let stopping = Atomic<Bool>(false)
    /// Which partitions' records the polling thread hands on (``RecordIntake``).
    private let intake = Mutex(RecordIntake<PartitionState>())
    /// Set when a load or a take-back queued a request in the intake: the polling loop takes the intake's lock for
    /// requests only then, not before every poll.
    private let intakeRequested = Atomic<Bool>(false)

    init(
        consumer: KafkaConsumer, topic: String, companion: String? = nil, store: StateStore, processor: EventProcessor, delivery: DeliveryService,
        tickets: EventTickets, ledger: OffsetLedger, pauses: FetchPauses, membership: Membership, health: Health, sweeper: RevocationSweeper,
        drainTimeout: Duration, takeBackAfter: Duration = .seconds(15), overBudgetRetry: Duration = .seconds(60),
        workers: PartitionWorkers, timers: Timers, logger: Logger
    ) {
        self.timers = timers
        self.workers = workers
        self.takeBackAfter = takeBackAfter
        self.overBudgetRetry = overBudgetRetry
        self.sweeper = sweeper
        self.consumer = consumer
        self.topic = topic
        self.companion = companion
        self.store = store
        self.processor = processor
        self.delivery = delivery
        self.tickets = tickets
        self.ledger = ledger
        self.pauses = pauses
        self.membership = membership
        self.health = health
        self.ownership = health.ownership
        self.drainTimeout = drainTimeout
        self.logger = logger
    }

    var owned: Set<Int32> { ownership.snapshot.owned }
    var ready: Set<Int32> { ownership.snapshot.ready }

    // MARK: Rebalances (on the polling thread)

    private func rebalanced(_ event: RebalanceEvent) {
        // Nothing is matched while partitions change hands: the records admitted before are finished first.
        workers.barrier()
        switch event {
        case .assigned(let topicPartitions):
            // The group coordinator answered: Kafka can be reached (whatever the producer says).
            health.kafkaReachable()
            // A rebalance ended. A partition given up as superseded that the group's new generation still assigns
            // here is this replica's after all: it is taken back (loaded again, with a new marker).
            let confirmed = ownership.fenced.filter { consumer.assignment().contains(TopicPartition(topic: topic, partition: $0)) }
            // A partition assigned again while owned is loaded again: records fetched meanwhile are dropped, so it
            // is read again from its committed offset too.
            let assigned = Set(topicPartitions.filter { $0.topic == topic }.map(\.partition))
            let again = assigned.intersection(ownership.snapshot.owned)
            if !again.isEmpty {
                // Its unfinished records are read again from the committed offset: their old tickets and places go,
                // or records matched against the replaced state would hold the partition's share of the in-flight
                // budget (and a place of the replica's) for good.
                ledger.revoked(Array(again), abandoned: tickets.abandon(partitions: again))
            }
            take(assigned.subtracting(again), takenBack: Set(confirmed).union(again))
        case .revoked(let topicPartitions, let lost):
            let partitions = topicPartitions.filter { $0.topic == topic }.map(\.partition)
            let gone = Set(partitions)
            // Stop serving first: API calls for these apps now go to the new owner.
            for partition in partitions where store.partition(partition)?.role == .owner {
                store.partition(partition)?.setRole(.releasing)
            }
            // No longer owned: the others hear of it at once.
            ownership.forget(gone, fenced: false)
            // No longer fetched here: no pause reason carries over to a later assignment.
            pauses.forget(gone)
            intake.withLock { $0.reset(gone) }
            if !lost { drain(partitions) }
            abandonWork(of: gone)
            for partition in partitions {
                if let state = store.partition(partition), !state.waitForWrites(timeout: .seconds(10)) {
                    logger.warning("state writes still in flight for a revoked partition", metadata: [LoggingKeys.kafkaPartition: "\(partition)"])
                }
                store.release(partition, keepAsStandby: membership.keepsStandby(of: partition))
            }
        }
    }

    /// Drops the partitions' delivery lines and unfinished records (the next owner consumes them again).
    private func abandonWork(of partitions: Set<Int32>) {
        delivery.release(partitions: partitions)
        let abandoned = tickets.abandon(partitions: partitions)
        ledger.revoked(Array(partitions), abandoned: abandoned)
    }

    /// Waits (bounded) until the partitions' records in flight are finished, so their offsets are stored
    /// before the partitions go to another member.
    private func drain(_ partitions: [Int32]) {
        let deadline = ContinuousClock.now + drainTimeout
        while ContinuousClock.now < deadline {
            if !partitions.contains(where: { ledger.inFlight($0) > 0 }) { return }
            Thread.sleep(forTimeInterval: 0.01)
        }
        logger.warning("revoked partitions still had records in flight", metadata: [LoggingKeys.kafkaPartitions: "\(partitions)"])
    }

    // MARK: Loading

    private func load(_ partition: Int32) async {
        guard let state = await store.load(partition) else {
            if store.overBudget(partition) != nil {
                // Not served until it fits (memory freed by another partition leaving, a budget raised): tried again.
                timers.schedule(after: overBudgetRetry.seconds) { [self] firing in
                    guard firing == .due, !stopping.load(ordering: .relaxed) else { return }
                    let now = ownership.snapshot
                    let owned = now.owned.contains(partition) && !now.ready.contains(partition)
                    if owned, store.overBudget(partition) != nil { loads.withLock { $0 }?.yield(partition) }
                }
            }
            return
        }
        guard ownership.snapshot.owned.contains(partition), store.isCurrent(state, index: partition),
            let handover = state.promote()
        else { return }
        delivery.adopt(handover)
        // Settings-driven revocations are checked again for the apps taken over (before their events resume).
        sweeper.poke()
        guard ownership.loaded(partition) else { return }
        // Activated by the polling thread, which is the one that drops and admits the partition's records.
        intake.withLock { $0.loaded(partition, state: state) }
        intakeRequested.store(true, ordering: .releasing)
    }

    /// On the polling thread: the superseded partitions to take back, and the loaded partitions whose records are
    /// handed on from now. Each of those is sought back to its first record dropped meanwhile (if any), then fetched
    /// again (unless its records in flight still fill its share: then once they drain).
    private func serveIntake() {
        guard intakeRequested.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let (takeBack, due) = intake.withLock { $0.takeRequests() }
        let stillFenced = takeBack.intersection(ownership.fenced)
        if !stillFenced.isEmpty { take([], takenBack: stillFenced) }
        for (partition, state) in due {
            // Given up (or loaded again) since: a later load activates it.
            guard store.isCurrent(state, index: partition), ownership.snapshot.ready.contains(partition) else { continue }
            let rewind = intake.withLock { $0.activate(partition, state: state) }
            guard let rewind else { continue }
            if !rewind.isEmpty {
                do {
                    try consumer.seek(rewind, timeoutMs: 10_000)
                    logger.info(
                        "records fetched while the partition was loading are read again",
                        metadata: [LoggingKeys.kafkaPartition: "\(partition)", "kafka.offsets": "\(rewind.values.sorted())"])
                } catch {
                    logger.error(
                        "cannot read again the records fetched while a partition was loading: they may be skipped",
                        metadata: [LoggingKeys.kafkaPartition: "\(partition)", LoggingKeys.error: "\(error)"])
                }
            }
            pauses.release([partition], for: .loading)
            logger.info("consuming partition", metadata: [LoggingKeys.kafkaTopic: "\(topic)", LoggingKeys.kafkaPartition: "\(partition)"])
        }
    }

    /// On the polling thread: whether `record` is handed on (its partition is active), else kept as dropped.
    private func accepts(_ record: KafkaRecord) -> Bool {
        let accepted = intake.withLock {
            $0.accepts(topic: record.topic, partition: record.partition, offset: record.offset) { $0.role == .owner }
        }
        // A partition still loading: its fetcher has started, so it can be paused now.
        if !accepted { pauses.applyDeferred(record.partition) }
        return accepted
    }

    /// On the polling thread: a record handed on but not admitted (its partition given up meanwhile) is kept as dropped.
    private func dropped(_ record: KafkaRecord) {
        intake.withLock { $0.drop(topic: record.topic, partition: record.partition, offset: record.offset) }
    }

    // MARK: Fencing

    /// The state topic shows that another replica took `partition` over (``OwnershipFence``) while the group has
    /// not told this one yet (it was frozen, or cut off from the coordinator): it stops consuming and serving the
    /// partition at once, as for a lost revocation. The group decides what comes next: a rebalance that takes the
    /// partition away ends it; one that leaves it here (or none at all within `takeBackAfter` while it is still
    /// assigned here: a broker that keeps a stale member's assignment) makes this replica take it back.
    func fenced(_ partition: Int32) {
        let topicPartition = TopicPartition(topic: topic, partition: partition)
        pauses.hold([partition], for: .loading)
        intake.withLock { $0.reset([partition]) }
        ownership.forget([partition], fenced: true)
        abandonWork(of: [partition])
        store.release(partition, keepAsStandby: false)
        timers.schedule(after: takeBackAfter.seconds) { [self] firing in
            // No rebalance came to say who owns it, and the group still assigns it here: taken back (the other
            // replica, if it still believes it owns it, is superseded in turn). Not once the gateway stops.
            let stale = ownership.fenced.contains(partition)
            guard firing == .due, stale, !stopping.load(ordering: .relaxed), consumer.assignment().contains(topicPartition) else { return }
            logger.warning(
                "the consumer group still assigns a partition another replica wrote to: taking it back",
                metadata: [LoggingKeys.kafkaPartition: "\(partition)"])
            intake.withLock { $0.requestTakeBack(partition) }
            intakeRequested.store(true, ordering: .releasing)
        }
    }

    /// Partitions assigned here (by the group), and ones taken back after they were superseded: paused until
    /// loaded. A partition taken back is read again from its committed offset: the records fetched while it was
    /// superseded were dropped unfinished (the group's assignment would have started there too). On the polling thread.
    private func take(_ assigned: Set<Int32>, takenBack: Set<Int32> = []) {
        let partitions = assigned.union(takenBack)
        guard !partitions.isEmpty else { return }
        // Paused once a record of it arrives while it loads (then its fetcher has started: a pause now could race that
        // start and leave the partition unfetched for good); such records are read again (``RecordIntake``).
        pauses.hold(partitions, for: .loading, deferred: true)
        // Read from the committed offset (an assignment) or sought back to it (taken back): nothing dropped before counts.
        intake.withLock { $0.reset(partitions) }
        if !takenBack.isEmpty {
            do {
                try consumer.seekToCommitted(FetchPauses.fetched(takenBack, topic: topic, companion: companion), timeoutMs: 10_000)
            } catch {
                logger.error(
                    "cannot read a partition taken back from its committed offset: its unfinished records may be skipped",
                    metadata: [LoggingKeys.kafkaPartitions: "\(takenBack.sorted())", LoggingKeys.error: "\(error)"])
            }
        }
        ledger.assigned(Array(partitions))
        ownership.take(partitions)
        let loads = self.loads.withLock { $0 }
        for partition in partitions.sorted() { loads?.yield(partition) }
    }

    // MARK: Service

    func run() async throws {
        // A shutdown while the start is not over (the broker cannot be reached) ends the wait: services stop in
        // order, this one first, before the store hears of it.
        let count = await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await store.waitForPartitionCount()
            } onGracefulShutdown: { [store] in
                store.abandonCount()
            }
        } onCancel: { [store] in
            store.abandonCount()
        }
        guard count > 0 else {
            // The start failed: the store's error ends the group and says why; returning now would end it first,
            // with "a service has finished unexpectedly" instead.
            try await gracefulShutdown()
            return
        }
        let (loads, loadRequests) = AsyncStream<Int32>.makeStream()
        self.loads.withLock { $0 = loadRequests }
        try consumer.subscribe(topics: [topic]) { [weak self] event in self?.rebalanced(event) }
        logger.info("joining the consumer group", metadata: [LoggingKeys.kafkaTopic: "\(topic)"])
        await withTaskCancellationHandler {
          await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let thread = Thread { [self] in
                            pollLoop()
                            continuation.resume()
                        }
                        thread.name = "kafka-consumer-poll"
                        thread.start()
                    }
                    loadRequests.finish()
                }
                for await partition in loads {
                    group.addTask { await self.load(partition) }
                }
            }
          } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
            self.membership.shutdownBegins()
          }
        } onCancel: {
            self.stopping.store(true, ordering: .relaxed)
        }
        // Polling stopped: give the records in flight a bounded time to finish, then leave the group (final
        // commit of the stored offsets).
        let deadline = ContinuousClock.now + drainTimeout
        while ledger.totalInFlight > 0, ContinuousClock.now < deadline {
            do {
                try await Task.sleep(for: .milliseconds(20))
            } catch {
                break  // cancelled: no more drain (a cancelled sleep returns at once, so looping would spin)
            }
        }
        if ledger.totalInFlight > 0 {
            logger.warning("records still in flight at shutdown stay uncommitted (replayed)", metadata: [LoggingKeys.records: "\(ledger.totalInFlight)"])
        }
        // Leaving the group commits the stored offsets; with the broker gone it could wait long: bounded.
        let closed = DispatchSemaphore(value: 0)
        let thread = Thread { [consumer] in
            consumer.close()
            closed.signal()
        }
        thread.name = "kafka-consumer-close"
        thread.start()
        let left = max(deadline - ContinuousClock.now, .seconds(2))
        let done = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async { continuation.resume(returning: closed.wait(timeout: .now() + left.seconds) == .success) }
        }
        if done {
            logger.info("consumer closed, offsets committed")
        } else {
            logger.warning("the consumer did not leave the group in time (Kafka unreachable?); uncommitted records are replayed")
        }
    }

    private func pollLoop() {
        let limiter = LogLimiter()
        while !stopping.load(ordering: .relaxed) {
            serveIntake()
            switch consumer.poll(timeoutMs: 100) {
            case .none: continue
            case .error(let error):
                if case .log(let suppressed) = limiter.decide(facility: "\(error.code)") {
                    logger.warning("consumer error", metadata: [LoggingKeys.error: "\(error)", LoggingKeys.suppressed: "\(suppressed)"])
                }
            case .record(let record):
                // The gateway's own latency starts here (one clock read per record).
                let fetchedAt = Uptime.now
                health.kafkaReachable()
                guard accepts(record) else { continue }
                guard let admitted = processor.admit(record, fetchedAt: fetchedAt) else {
                    dropped(record)
                    continue
                }
                workers.run(on: record.partition) { [processor] worker in processor.process(admitted, on: worker) }
            }
        }
    }
}
