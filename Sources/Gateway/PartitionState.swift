import Foundation
import GatewayAPI
import GatewayCore
import GatewayLogging
import KafkaClient
import Logging
import PushCore
import Synchronization

/// Drives one partition's ``PartitionMachine``: turns calls, acknowledgements, timers and gap reads into its
/// inputs, and does what its actions say.
///
/// The machine decides everything; this type only executes, and never under the partition's lock: the lock
/// guards the machine's inputs and the queue of actions decided but not yet issued, nothing else, so it is a leaf
/// of the lock order (nothing is called while it is held). The actions whose order is the log's or a subscription
/// line's (produce, deliver, retain a ticket, an ended subscription: ``PartitionAction/isOrdered``) are issued in
/// decision order by one thread at a time: each input queues its batch under the lock, and the caller that finds
/// no drain running issues the queue, batch after batch, with the lock released; a caller whose batch another
/// thread issues waits for it. So when an input returns, its actions and every earlier input's are issued, as when
/// they were issued under the lock; meanwhile other inputs (a write's acknowledgement, an API call) are decided.
/// Everything else (answers to callers, timers, gap reads, logs, releases of tickets) runs after the caller's
/// batch is issued.
final class PartitionState: Sendable {
    typealias Machine = PartitionMachine
    typealias Action = PartitionAction

    let partition: Int32
    private let topic: String
    private let sink: any RecordSink
    /// The partition's lock: its inputs run under it.
    private let machine: Mutex<Machine>
    /// The ordered actions decided and not issued yet. Its lock is taken under the machine's (to queue a batch in
    /// decision order) or alone (to take the batches out), and nothing is called while it is held.
    private let outbox = Mutex(Outbox())
    /// Lock-free copies of the role and of the fence's last confirmation (``PartitionMachine/confirmationStamp``),
    /// updated at the end of every input.
    private let roleCode: Atomic<UInt8>
    private let confirmation = Atomic<UInt64>(.max)
    private let hooks: PartitionHooks
    /// The partition's estimated bytes of state (``StateBudget``).
    let bytes: ByteMeter?
    private let logger: Logger
    /// Failed writes are logged at most once per error code and interval, over all partitions.
    private static let failureLog = LogLimiter()

    /// Where the ordered actions of an input go: the delivery service, the event tickets, and what an event's
    /// notifications carry with them.
    private struct Destination: Sendable {
        var tickets: EventTickets?
        var delivery: (any DeliveryInput)?
        /// The app's settings the notifications were made with (an event's): the delivery service chooses their
        /// lanes by it.
        var profile: AppProfile?
        /// When the record being matched was fetched (``PendingNotification/fetchedAt``), 0 for other inputs.
        var fetchedAt: UInt64 = 0

        static let none = Destination()
    }

    /// One input's ordered actions, queued in decision order.
    private struct Batch: Sendable {
        var actions: [Action]
        /// Its unordered actions, when the draining thread performs them once its drain ends (an input made on
        /// that thread while it drains: a producer's refusal fed back as an acknowledgement).
        var later: [Action] = []
        var destination: Destination
        /// Signalled once the batch is issued, for a caller that waits while another thread issues it.
        var issued: DispatchSemaphore?
    }

    private struct Outbox {
        /// Batches decided and not yet issued, oldest first.
        var batches: [Batch] = []
        /// The thread issuing the batches, if one is.
        var drainer: pthread_t?
    }

    /// What the caller of an input does once the lock is released.
    private enum Turn: Sendable {
        /// Nothing of it is queued, and nothing before it is unissued.
        case none
        /// Issue the outbox (this input's batch and any queued after it).
        case drain
        /// Wait until another thread has issued this input's batch.
        case wait(DispatchSemaphore)
    }

    init(
        partition: Int32, topic: String, role: PartitionRole, sink: any RecordSink, hooks: PartitionHooks = PartitionHooks(), logger: Logger,
        bytes: ByteMeter? = nil
    ) {
        self.partition = partition
        self.topic = topic
        self.sink = sink
        self.bytes = bytes
        self.machine = Mutex(Machine(role: role, bytes: bytes))
        self.roleCode = Atomic(role.code)
        self.hooks = hooks
        self.logger = logger
    }

    // MARK: Driving the machine

    /// Runs one input under the lock: `body` returns the machine's actions (and a value). Its ordered actions are
    /// queued there and issued after the lock is released (``Turn``); the others are performed once they are.
    private func input<Value>(to destination: Destination = .none, _ body: (inout Machine) -> (Value, [Action])) -> Value {
        var turn = Turn.none
        var later: [Action] = []
        let value = machine.withLock { machine -> Value in
            let (value, actions) = body(&machine)
            publish(machine)
            (turn, later) = queue(actions, to: destination)
            return value
        }
        switch turn {
        case .none: break
        case .drain: drain()
        case .wait(let issued): issued.wait()
        }
        perform(later)
        return value
    }

    private func input(to destination: Destination = .none, _ body: (inout Machine) -> [Action]) {
        input(to: destination) { machine -> ((), [Action]) in ((), body(&machine)) }
    }

    /// The lock-free copies of the role and the confirmation (under the lock, after each input).
    private func publish(_ machine: Machine) {
        roleCode.store(machine.contents.role.code, ordering: .releasing)
        confirmation.store(machine.confirmationStamp, ordering: .releasing)
    }

    /// Queues `actions`' ordered ones as one batch, and says what the caller does next and what it performs after.
    /// An input whose actions are all unordered waits too while earlier batches are being issued: what it performs
    /// (a supersession's abandonment, an answer) comes after everything decided before it.
    private func queue(_ actions: [Action], to destination: Destination) -> (Turn, later: [Action]) {
        // Split only when the input has both kinds (most have one: an event's deliveries, an answer).
        let orderedCount = actions.count(where: \.isOrdered)
        var ordered: [Action] = []
        var later: [Action] = []
        if orderedCount == actions.count {
            ordered = actions
        } else if orderedCount == 0 {
            later = actions
        } else {
            ordered.reserveCapacity(orderedCount)
            later.reserveCapacity(actions.count - orderedCount)
            for action in actions {
                if action.isOrdered { ordered.append(action) } else { later.append(action) }
            }
        }
        return outbox.withLock { outbox -> (Turn, later: [Action]) in
            guard let drainer = outbox.drainer else {
                guard !ordered.isEmpty else { return (.none, later) }
                outbox.batches.append(Batch(actions: ordered, destination: destination))
                outbox.drainer = pthread_self()
                return (.drain, later)
            }
            guard !actions.isEmpty else { return (.none, []) }
            if pthread_equal(drainer, pthread_self()) != 0 {
                // Made by the draining thread itself: queued with everything, for its drain to do.
                outbox.batches.append(Batch(actions: ordered, later: later, destination: destination))
                return (.none, [])
            }
            let issued = DispatchSemaphore(value: 0)
            outbox.batches.append(Batch(actions: ordered, destination: destination, issued: issued))
            return (.wait(issued), later)
        }
    }

    /// Issues the outbox until it is empty (the lock released while issuing), then ends the drain. The other
    /// actions of inputs made on this thread meanwhile are performed once the drain has ended: nothing but
    /// issuing happens while this thread holds the drain, so nothing it performs can wait for the drain.
    private func drain() {
        var deferred: [Action] = []
        while true {
            let batches = outbox.withLock { outbox -> [Batch] in
                if outbox.batches.isEmpty { outbox.drainer = nil }
                defer { outbox.batches = [] }
                return outbox.batches
            }
            if batches.isEmpty { break }
            for batch in batches {
                issue(batch)
                deferred += batch.later
                batch.issued?.signal()
            }
        }
        perform(deferred)
    }

    /// Issues one batch's actions, in order. A record the producer refuses at once is fed back to the machine as
    /// its acknowledgement; what that decides is queued behind the batches already there, for this drain.
    private func issue(_ batch: Batch) {
        let destination = batch.destination
        for action in batch.actions {
            switch action {
            case .produce(let sequence, let key, let value, let tag):
                let record = KafkaRecord(
                    topic: topic, partition: partition, key: key, value: value,
                    headers: tag.map { [KafkaHeader(name: OwnerTag.header, value: $0)] } ?? [])
                if let error = sink.produce(record, completion: { [self] result in acknowledged(sequence, result) }) {
                    input(to: destination) { $0.writeAcknowledged(sequence, .failure(Self.failure(error)), uptime: Uptime.now) }
                }
            case .deliver(let notifications):
                destination.delivery?.enqueue(notifications, fetchedAt: destination.fetchedAt, profile: destination.profile)
            case .retainTicket(let ticket, let count):
                destination.tickets?.retain(ticket, count: count)
            case .subscriptionEnded(let ended):
                // Queued (never sent) here: the event hook takes only its own lock and never waits.
                hooks.subscriptionEnded(ended)
            default:
                assertionFailure("not an ordered action: \(action)")
            }
        }
    }

    private static func failure(_ error: KafkaError) -> WriteFailure {
        WriteFailure(code: "\(error.code)", message: "\(error)", maybeStored: error.maybeStored)
    }

    /// Performs the actions that need no order with the log (outside the lock).
    private func perform(_ actions: [Action]) {
        for action in actions {
            switch action {
            case .produce, .deliver, .retainTicket, .subscriptionEnded:
                // The ordered ones (``PartitionAction/isOrdered``), named so this switch stays exhaustive: a new
                // action must be placed on one side or the other.
                assertionFailure("issued in order by the drain")
            case .releaseTicket(let ticket):
                hooks.releaseTicket(ticket)
            case .settle(let callback, let stored, let maybeStored):
                callback(stored, maybeStored)
            case .resume(let callback, let answer):
                callback(answer, false)
            case .schedule(let timer, let seconds):
                // On the gateway's timer service (the sink's). Retried writes end with the sink or the timers, as
                // `RecordSink.produceUntilStored` does: none outlives a shutdown. A confirmation's timeout runs
                // even then (at once: its waiter hears no).
                guard sink.isOpen || !timer.writesAgain else { continue }
                let wait = timer.jittered ? seconds * Double.random(in: 0.8...1.2) : seconds
                sink.timers.schedule(after: wait) { [self] firing in
                    guard (firing == .due && sink.isOpen) || !timer.writesAgain else { return }
                    input { $0.timerFired(timer, uptime: Uptime.now) }
                }
            case .readGap(let from, let to, let tag, let attempt, let after):
                // Read off the lock and off the cooperative pool (the timers run work on a global queue: blocking
                // reads are fine).
                sink.timers.schedule(after: after) { [self] firing in
                    // The gap reads end with the sink and the timers too: a stopping replica answers the writes
                    // behind the gap "maybe stored" rather than read (and fail to read) for up to a minute.
                    guard firing == .due, sink.isOpen else { return input { $0.gapAbandoned(uptime: Uptime.now) } }
                    let records = hooks.readRange(partition, from, to)?.map(LogRecord.init)
                    input { $0.gapRead(from: from, to: to, tag: tag, attempt: attempt, records: records, uptime: Uptime.now) }
                }
            case .superseded(let from, let to):
                logger.error(
                    "another replica took this partition over (its load marker is in the state topic after this replica's): serving and writing it stopped",
                    metadata: [LoggingKeys.kafkaPartition: "\(partition)", LoggingKeys.gapFrom: "\(from)", LoggingKeys.gapTo: "\(to)"])
                hooks.metrics?.ownershipFenced()
                // Before anyone waiting hears of it: the partition's events and deliveries are abandoned first, so
                // nothing of it is committed or released as done.
                hooks.fenced(partition)
            case .zombieWritesRewritten(let count):
                logger.warning(
                    "records of an earlier owner found after this replica took the partition: rewritten from memory",
                    metadata: [LoggingKeys.kafkaPartition: "\(partition)", LoggingKeys.records: "\(count)"])
                hooks.metrics?.zombieWritesRepaired(count)
            case .rewriteRetryLine(let key):
                hooks.rewriteRetryLine(key)
            case .writeFailed(let failure):
                // Every write fails while the broker is away: one line per kind of error and interval.
                if case .log(let suppressed) = Self.failureLog.decide(facility: failure.code) {
                    logger.error(
                        "state write failed",
                        metadata: [LoggingKeys.kafkaPartition: "\(partition)", LoggingKeys.error: "\(failure.message)", LoggingKeys.suppressed: "\(suppressed)"])
                }
            case .checkpointDropped(let app):
                logger.debug("shadow checkpoint dropped: the partition moved", metadata: [LoggingKeys.app: "\(app)"])
            }
        }
    }

    private func acknowledged(_ sequence: UInt64, _ result: Result<(partition: Int32, offset: Int64), KafkaError>) {
        let outcome = result.map(\.offset).mapError(Self.failure)
        input { $0.writeAcknowledged(sequence, outcome, uptime: Uptime.now) }
    }

    // MARK: Reading

    /// The role, read without the partition's lock (the store reads it under its own lock).
    var role: PartitionRole { PartitionRole(code: roleCode.load(ordering: .acquiring)) }

    func setRole(_ role: PartitionRole) { input { $0.setRole(role); return [] } }

    /// Runs `body` with exclusive access to the contents (reads, and changes that write nothing).
    func withContents<Result: Sendable, Failure: Error>(_ body: (inout PartitionContents) throws(Failure) -> Result) throws(Failure) -> Result {
        try machine.withLock { (machine: inout Machine) throws(Failure) -> Result in try body(&machine.contents) }
    }

    var logEnd: Int64 { machine.withLock { $0.contents.logEnd } }

    var subscriptionCount: Int { machine.withLock { $0.contents.subscriptionCount } }

    /// The apps present in this partition.
    var appNames: [String] { machine.withLock { $0.contents.apps.values.map(\.name) } }

    // MARK: From the log

    /// Applies a record read from the state topic (loading or standby); false when it was skipped as written by a
    /// superseded owner.
    @discardableResult
    func applyFromLog(_ record: StateRecord, key: [UInt8], offset: Int64, tag: [UInt8]?) -> Bool {
        machine.withLock { $0.contents.applyFromLog(record, key: key, offset: offset, tag: tag) }
    }

    /// A load marker was read at `offset`: from here on, records are the ones of the owner tagged `tag`.
    func readMarker(tag: [UInt8]?, offset: Int64) { machine.withLock { $0.readMarker(tag: tag, offset: offset) } }

    /// The log was read up to `offset` (a record this replica skips, such as an ownership check).
    func advanceLogEnd(to offset: Int64) { machine.withLock { $0.advanceLogEnd(to: offset) } }

    /// This replica is about to write a load marker tagged `tag`.
    func willWriteMarker(tag: [UInt8]) { machine.withLock { $0.willWriteMarker(tag: tag) } }

    /// This replica wrote its load marker, tagged `tag`, at `offset`, starting at `writtenAt` (``Uptime``).
    func markerWritten(tag: [UInt8], offset: Int64, writtenAt: UInt64) {
        machine.withLock { $0.markerWritten(tag: tag, offset: offset, writtenAt: writtenAt) }
    }

    /// Makes this replica the owner of a loaded partition (``PartitionMachine/promote(uptime:now:)``): returns what
    /// the previous owner left to deliver, nil when the partition was given up meanwhile.
    func promote() -> Machine.Handover? {
        input { machine -> (Machine.Handover?, [Action]) in
            guard let promoted = machine.promote(uptime: Uptime.now, now: Date().timeIntervalSince1970) else { return (nil, []) }
            return (promoted.handover, promoted.actions)
        }
    }

    // MARK: Ownership

    /// True once a write produced at or after `instant` landed where this owner expected it: no other owner had
    /// taken the partition then, so what this replica decided before `instant` stands. False when it is not the
    /// owner, was superseded, or no confirmation came within `timeout` (the broker is away).
    func confirmOwnership(after instant: UInt64, timeout: Double = 5) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let resumed = Atomic<Bool>(false)
            let callback = Reply { answer, _ in
                if !resumed.exchange(true, ordering: .acquiringAndReleasing) { continuation.resume(returning: answer) }
            }
            input { $0.confirmOwnership(after: instant, timeout: timeout, callback: callback, uptime: Uptime.now) }
        }
    }

    /// True while this replica may act on its ownership without asking: confirmed within the lease, and the process
    /// has run without a stall since.
    var ownershipIsCurrent: Bool {
        // Lock-free: it is asked before every notification.
        guard role == .owner else { return false }
        let confirmed = confirmation.load(ordering: .acquiring)
        if confirmed == .max { return true }
        return confirmed != 0 && Uptime.now &- confirmed < hooks.lease && StallWatch.shared.ranWithoutStall(since: confirmed)
    }

    /// Current ownership: at once within the lease, else after a confirmation (a write produced now).
    func ensureOwnership() async -> Bool {
        if ownershipIsCurrent { return true }
        return await confirmOwnership(after: Uptime.now)
    }

    // MARK: The API

    /// Makes a decision and writes the records it implies; returns its value once they are durable and applied.
    /// With an `identity`, waits first for the writes of that subscription still in flight (one decision at a
    /// time per subscription). A decision that writes nothing answers once this replica's ownership is confirmed
    /// after it. 503 when this replica is not the owner (with `notOwner`, so a forwarding replica asks the new
    /// owner), or when the records could not be stored.
    func write<Value: Sendable>(
        identity: RetryKey?, _ decide: (inout PartitionContents) throws(APIError) -> (records: [StateRecord], value: Value)
    ) async throws(APIError) -> Value {
        try await write(
            waitFirst: { if let identity { await waitForWrites(of: identity) } }, admission: { $0.admission(identity: identity) },
            decide)
    }

    /// Like ``write(identity:_:)`` for a decision about several subscriptions (a token replacement): waits first
    /// for the writes still in flight about every subscription `concerns` picks, including ones not applied yet
    /// (a create in flight), so that the decision sees each of them as its last write left it.
    func write<Value: Sendable>(
        concerning concerns: @Sendable (RetryKey) -> Bool, _ decide: (inout PartitionContents) throws(APIError) -> (records: [StateRecord], value: Value)
    ) async throws(APIError) -> Value {
        try await write(
            waitFirst: { await waitForWrites(concerning: concerns) }, admission: { $0.admission(concerning: concerns) }, decide)
    }

    private func write<Value: Sendable>(
        waitFirst: () async -> Void, admission: (Machine) -> Machine.Admission,
        _ decide: (inout PartitionContents) throws(APIError) -> (records: [StateRecord], value: Value)
    ) async throws(APIError) -> Value {
        while true {
            await waitFirst()
            let attempt = input { machine -> (Result<(Value, Settlement?)?, APIError>, [Action]) in
                switch admission(machine) {
                case .notOwner: return (.failure(.notOwner("the application's partition is moving to another replica; retry")), [])
                case .busy: return (.success(nil), [])
                case .open: break
                }
                do throws(APIError) {
                    let (records, value) = try decide(&machine.contents)
                    guard !records.isEmpty else { return (.success((value, nil)), []) }
                    let settlement = Settlement(count: records.count)
                    let actions = machine.decided(
                        records,
                        callback: Reply { stored, maybeStored in
                            if maybeStored { settlement.markMaybeStored() }
                            settlement.settle(stored)
                        }, uptime: Uptime.now)
                    return (.success((value, settlement)), actions)
                } catch {
                    return (.failure(error), [])
                }
            }
            switch attempt {
            case .failure(let error):
                // A refusal is an answer about the state too: given only by the current owner.
                guard await ensureOwnership() else {
                    throw .notOwner("the application's partition is moving to another replica; retry")
                }
                throw error
            case .success(nil): continue
            case .success(let (value, settlement)?):
                guard let settlement else {
                    guard await ensureOwnership() else {
                        throw .notOwner("the application's partition is moving to another replica; retry")
                    }
                    return value
                }
                if !(await settlement.wait()) {
                    if settlement.maybeStored {
                        // Sent, then timed out: the broker may have stored it, and a new owner would then load it.
                        // Neither "done" nor "not done" can be promised.
                        throw APIError(
                            .gatewayTimeout, "timeout",
                            "the change was sent to Kafka but not confirmed in time: it may or may not have been made; read it before retrying")
                    }
                    if machine.withLock({ $0.isFenced }) {
                        throw .notOwner("the application's partition was taken over by another replica; retry")
                    }
                    throw .unavailable("the change could not be stored; retry later", retryAfterSeconds: 1)
                }
                return value
            }
        }
    }

    /// Reads under the lock; answers only while this replica's ownership is current (``ensureOwnership()``), so the
    /// answer reflects every write acknowledged before it, through any replica. 503 `notOwner` otherwise.
    func read<Value: Sendable>(_ body: (inout PartitionContents) -> Value) async throws(APIError) -> Value {
        let value = machine.withLock { machine -> Value? in
            guard machine.contents.role == .owner else { return nil }
            return body(&machine.contents)
        }
        guard let value, await ensureOwnership() else {
            throw .notOwner("the application's partition is moving to another replica; retry")
        }
        return value
    }

    private func waitForWrites(concerning concerns: @Sendable (RetryKey) -> Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiting = machine.withLock { $0.waitForWrites(concerning: concerns, callback: Reply { _, _ in continuation.resume() }) }
            if !waiting { continuation.resume() }
        }
    }

    private func waitForWrites(of identity: RetryKey) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiting = machine.withLock { $0.waitForWrites(of: identity, callback: Reply { _, _ in continuation.resume() }) }
            if !waiting { continuation.resume() }
        }
    }

    // MARK: Writes of the other services

    /// Writes records that only checkpoint what memory already holds (pending retries): nothing is applied on
    /// acknowledgement. `onSettled` reports whether they were all stored.
    func checkpoint(_ records: [StateRecord], onSettled: (@Sendable (Bool) -> Void)? = nil) {
        guard !records.isEmpty else { return }
        var callback: Reply?
        if let onSettled {
            let settlement = Settlement(count: records.count, completion: onSettled)
            callback = Reply { stored, _ in settlement.settle(stored) }
        }
        input { $0.checkpoint(records, callback: callback, uptime: Uptime.now) }
    }

    /// Blocks the calling thread until every write in flight is acknowledged (before the partition is given
    /// up), at most `timeout`. True when none is left.
    func waitForWrites(timeout: Duration) -> Bool {
        let done = DispatchSemaphore(value: 0)
        input { $0.whenDrained(Reply { _, _ in done.signal() }) }
        return done.wait(timeout: .now() + timeout.seconds) == .success
    }

    /// Writes the record of `key` as memory has it after `delay` seconds, until it is stored or the partition is
    /// given up (``PartitionMachine/scheduleRepair(_:delay:)``).
    func scheduleRepair(_ key: RetryKey, delay: Double) { input { $0.scheduleRepair(key, delay: delay) } }

    // MARK: Revocations

    /// Revokes, now, the subscriptions `select` picks in `app` for each reason (``PartitionMachine/revoke(app:now:uptime:select:)``);
    /// their revokes are queued in `delivery`.
    func revoke(
        app name: String, delivery: any DeliveryInput, now: Double,
        select: (AppData) -> [(RevocationReason, [Subscription])]
    ) -> (counts: [(RevocationReason, Int)], afterOffset: Int64) {
        input(to: Destination(delivery: delivery)) { machine -> ((counts: [(RevocationReason, Int)], afterOffset: Int64), [Action]) in
            let result = machine.revoke(app: name, now: now, uptime: Uptime.now, select: select)
            return ((result.counts, result.afterOffset), result.actions)
        }
    }

    /// The revoke of `key` was delivered (or discarded at its deadline): its tombstone follows.
    func finalizeRevocation(_ key: RetryKey) { input { $0.revokeDelivered(key, uptime: Uptime.now) } }

    /// The provider says `key`'s token is dead (`answer`): the subscription is deleted.
    func deleteDeadToken(_ key: RetryKey, answer: ProviderAnswer) { input { $0.tokenDead(key, answer: answer, uptime: Uptime.now) } }

    // MARK: Events

    /// Matches one change event (on its partition's worker, in log order): ``PartitionMachine/match(_:offset:shadowLimit:now:eventTime:ticket:uptime:v1Payload:)``.
    /// Its notifications are queued in `delivery` with `profile`; each of them and each state write holds `ticket` until settled.
    /// `fetchedAt`: when the consumer's poll returned the event's record (``PendingNotification/fetchedAt``).
    func process(
        _ event: ChangeEvent, offset: Int64, profile: AppProfile, now: Int64, eventTime: Double?, fetchedAt: UInt64 = 0,
        ticket: UInt64, tickets: EventTickets, delivery: any DeliveryInput, payloads: PayloadBuilder
    ) -> EventOutcome {
        input(to: Destination(tickets: tickets, delivery: delivery, profile: profile, fetchedAt: fetchedAt)) { machine -> (EventOutcome, [Action]) in
            machine.match(
                event, offset: offset, shadowLimit: profile.settings.shadowMaxBytes, now: now, eventTime: eventTime, ticket: ticket,
                uptime: Uptime.now
            ) { path, subscriber, content in
                payloads.payload(profile: profile, path: path, subscriber: subscriber, format: .v1, content: content)
            }
        }
    }

    /// Sends a user notification to each device of its uid (``PartitionMachine/notifyUser(_:now:eventTime:ticket:v1Payload:)``);
    /// each notification holds `ticket` until delivered or stored for retry. Returns how many were queued.
    func notifyUser(
        _ notification: UserNotification, profile: AppProfile, now: Int64, eventTime: Double?, fetchedAt: UInt64 = 0,
        ticket: UInt64, tickets: EventTickets, delivery: any DeliveryInput, payloads: PayloadBuilder
    ) -> Int {
        input(to: Destination(tickets: tickets, delivery: delivery, profile: profile, fetchedAt: fetchedAt)) { machine -> (Int, [Action]) in
            machine.notifyUser(notification, now: now, eventTime: eventTime, ticket: ticket) { path, subscriber, content in
                payloads.payload(profile: profile, path: path, subscriber: subscriber, format: .v1, content: content)
            }
        }
    }
}
