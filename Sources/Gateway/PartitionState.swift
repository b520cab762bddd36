import Foundation
import GatewayAPI
import GatewayLogging
import KafkaClient
import Logging
import PushCore
import Synchronization

/// One partition of the state topic as this replica holds it (``PartitionContents``), behind one lock, and
/// the only way to change it.
///
/// - Loading and standby: records read from the log are applied in log order (``applyFromLog(_:key:offset:tag:)``),
///   skipping those of superseded owners (``OwnershipFence``).
/// - Owner: every decision (an API write, an event's matching, a revocation) is made under the lock, and the
///   records it implies are produced under the same lock, so the log holds them in decision order. They
///   apply to memory when acknowledged, still in that order: an API call answers once its write is durable and
///   applied, so the next read (through any replica, since all calls for the partition come here) sees it.
///   Shadows and revocations are the exception: they take effect in memory at once (matching must see them for
///   the very next event) and their records are checkpoints of that state.
/// - Fencing: every write is tagged with this owner's tag and must land right after the previous one; a write
///   that lands further on is applied only once the gap is read back and holds no newer owner's marker. When
///   it does, this replica is superseded: nothing more is applied, acknowledged, served or sent
///   (``PartitionHooks/fenced``). An answer that writes nothing (a read, a 404, a 409) is given only once a
///   write produced after the decision has landed where expected (``confirmOwnership(after:)``); a notification
///   is sent only while ownership was confirmed within the lease and the process has not stalled since
///   (``ownershipIsCurrent``).
/// - Revocation: a revoked subscription stops matching at the revocation point (the moment the decision is
///   made under the lock), its revoke message is queued behind what it already had, and a marker record
///   makes the pending revoke durable; the tombstone follows once the revoke is delivered
///   (``finalizeRevocation(_:)``). A write produced before the revocation never brings it back.
final class PartitionState: Sendable {
    let partition: Int32
    private let topic: String
    private let sink: any RecordSink
    private let contents: Mutex<PartitionContents>
    private let roleCode: Atomic<UInt8>
    /// The fence's last confirmation (``Uptime``), read lock-free: `.max` without a fence (nothing to confirm),
    /// 0 while superseded or while a gap is being read back.
    private let confirmation = Atomic<UInt64>(.max)
    private let hooks: PartitionHooks
    /// The partition's estimated bytes of state (``StateBudget``).
    let bytes: ByteMeter?
    private let logger: Logger
    /// Failed writes are logged at most once per error code and interval, over all partitions.
    private static let failureLog = LogLimiter()
    /// Gaps are read back here, off the lock and off the cooperative pool (blocking reads).
    private static let gapReads = DispatchQueue(label: "state-gap-reads", attributes: .concurrent)

    init(
        partition: Int32, topic: String, role: PartitionRole, sink: any RecordSink, hooks: PartitionHooks = PartitionHooks(), logger: Logger,
        bytes: ByteMeter? = nil
    ) {
        self.partition = partition
        self.topic = topic
        self.sink = sink
        self.bytes = bytes
        var contents = PartitionContents(role: role)
        contents.bytes = bytes
        self.contents = Mutex(contents)
        self.roleCode = Atomic(role.code)
        self.hooks = hooks
        self.logger = logger
    }

    /// The role, read without the partition's lock (the store reads it under its own lock).
    var role: PartitionRole { PartitionRole(code: roleCode.load(ordering: .acquiring)) }

    func setRole(_ role: PartitionRole) { contents.withLock { setRole(role, in: &$0) } }

    /// Changes the role under the lock, and its lock-free copy with it.
    private func setRole(_ role: PartitionRole, in contents: inout PartitionContents) {
        contents.role = role
        roleCode.store(role.code, ordering: .releasing)
    }

    /// Runs `body` with exclusive access to the contents (reads, and changes that write nothing).
    func withContents<Result: Sendable, Failure: Error>(_ body: (inout PartitionContents) throws(Failure) -> Result) throws(Failure) -> Result {
        try contents.withLock { (contents: inout PartitionContents) throws(Failure) -> Result in try body(&contents) }
    }

    var logEnd: Int64 { contents.withLock { $0.logEnd } }

    var subscriptionCount: Int { contents.withLock { $0.subscriptionCount } }

    // MARK: From the log

    /// Applies a record read from the state topic (loading or standby); false when it was skipped as written by a
    /// superseded owner.
    @discardableResult
    func applyFromLog(_ record: StateRecord, key: [UInt8], offset: Int64, tag: [UInt8]?) -> Bool {
        contents.withLock { $0.applyFromLog(record, key: key, offset: offset, tag: tag) }
    }

    /// A load marker was read at `offset`: from here on, records are the ones of the owner tagged `tag`.
    func readMarker(tag: [UInt8]?, offset: Int64) {
        contents.withLock { contents in
            contents.logEnd = max(contents.logEnd, offset + 1)
            contents.logOwner = tag
        }
    }

    /// The log was read up to `offset` (a record this replica skips, such as an ownership check).
    func advanceLogEnd(to offset: Int64) { contents.withLock { $0.logEnd = max($0.logEnd, offset) } }

    /// This replica is about to write a load marker tagged `tag` (before it is written: a write of this replica in
    /// flight may find it in a gap before the marker's own acknowledgement comes back).
    func willWriteMarker(tag: [UInt8]) { _ = contents.withLock { $0.ownTags.insert(tag) } }

    /// This replica wrote its load marker, tagged `tag`, at `offset`, starting at `writtenAt` (``Uptime``); it is
    /// promoted once the log is read up to it. Its ownership counts as confirmed when the marker was written, not
    /// when the load ends: a load that took longer than the lease confirms its ownership before it answers.
    func markerWritten(tag: [UInt8], offset: Int64, writtenAt: UInt64) {
        contents.withLock { $0.marker = (tag, offset, writtenAt) }
    }

    /// Makes this replica the owner of a loaded partition: restores the shadow checkpoints into the index, hands
    /// over what the previous owner left to deliver (pending retries, revokes not yet sent), starts the fence from
    /// its load marker, and rewrites the keys of the superseded records it skipped.
    func promote() -> (retries: [[PendingNotification]], revoked: [RevokedSubscription])? {
        var deferred: Deferred = []
        let handed = contents.withLock { contents -> ([[PendingNotification]], [RevokedSubscription])? in
            // Given up meanwhile (a revocation between the load and now): not promoted.
            guard contents.role == .loading else { return nil }
            for (app, checkpoints) in contents.checkpoints {
                let data = contents.app(app.string)
                for (path, value) in checkpoints { data.index.restoreShadow(at: path, value: value) }
            }
            contents.checkpoints = [:]
            let retries = Array(contents.followedRetries.values)
            contents.followedRetries = [:]
            setRole(.owner, in: &contents)
            if let marker = contents.marker {
                let fence = OwnershipFence(tag: marker.tag, markerOffset: marker.offset, at: marker.writtenAt)
                contents.fence = fence
                confirmation.store(fence.confirmedAt, ordering: .releasing)
                contents.marker = nil
            }
            let superseded = Array(contents.superseded.values)
            contents.superseded = [:]
            rewrite(superseded, in: &contents, deferred: &deferred)
            return (retries, Array(contents.revoked.values))
        }
        for action in deferred { action() }
        return handed
    }

    // MARK: The owner's writes

    typealias Deferred = [@Sendable () -> Void]

    /// The Kafka record of a write, tagged with this owner's tag.
    private func kafkaRecord(key: [UInt8], value: [UInt8], contents: PartitionContents) -> KafkaRecord {
        let tag = contents.fence?.tag ?? contents.marker?.tag
        return KafkaRecord(
            topic: topic, partition: partition, key: key, value: value,
            headers: tag.map { [KafkaHeader(name: OwnerTag.header, value: $0)] } ?? [])
    }

    /// Produces `write` (a state record, or an ownership check) in decision order (the caller holds the lock).
    private func submit(_ write: InFlightWrite, key: [UInt8], value: [UInt8], in contents: inout PartitionContents, deferred: inout Deferred) {
        let sequence = contents.nextSequence
        contents.nextSequence += 1
        contents.inFlight[sequence] = write
        let record = kafkaRecord(key: key, value: value, contents: contents)
        if let error = sink.produce(record, completion: { [self] result in acknowledged(sequence, result.map(\.offset)) }) {
            contents.inFlight[sequence]?.result = .failure(error)
            applyAcknowledged(&contents, deferred: &deferred)
        }
    }

    /// Produces `record` in decision order (the caller holds the lock): it applies when acknowledged, in
    /// produce order; `onSettled` runs once it is applied (true) or failed (false). `counted` marks a write
    /// that later decisions about the same subscription must wait for (API writes).
    private func produce(
        _ record: StateRecord, in contents: inout PartitionContents, counted: Bool = false,
        onSettled: (@Sendable (Bool) -> Void)?, onMaybeStored: (@Sendable () -> Void)? = nil, deferred: inout Deferred
    ) {
        var write = InFlightWrite(record: record, onSettled: onSettled)
        write.onMaybeStored = onMaybeStored
        if counted, case .subscription(let subscription) = record {
            contents.pendingWrites[subscription.identity, default: 0] += 1
            if subscription.settings != nil, subscription.revoked == nil, let app = contents.existingApp(subscription.app),
                app.index.subscription(path: subscription.subscription.path, subscriber: subscription.subscription.subscriber) == nil
            {
                app.reserve(subscription.subscription, by: 1)
                write.creates = subscription.subscription
            }
        } else {
            write.uncounted = true
        }
        if case .subscription(let subscription) = record {
            // A subscription record that was not stored (or maybe was: a timeout) is written again, as memory has
            // it then, so that the log converges to what this replica decided and answered.
            let key = subscription.identity
            let settled = write.onSettled
            write.onSettled = { [self] stored in
                if !stored { scheduleRepair(key, delay: 0.5) }
                settled?(stored)
            }
        }
        submit(write, key: record.key, value: record.value ?? [], in: &contents, deferred: &deferred)
    }

    private func acknowledged(_ sequence: UInt64, _ result: Result<Int64, KafkaError>) {
        var deferred: Deferred = []
        contents.withLock { contents in
            guard contents.inFlight[sequence] != nil else { return }
            contents.inFlight[sequence]?.result = result
            applyAcknowledged(&contents, deferred: &deferred)
        }
        for action in deferred { action() }
    }

    /// Applies the acknowledged writes at the head of the produce order. A write that landed past where this
    /// owner's next write was expected stops the applying until the gap is read back (``checkGap(from:to:tag:)``).
    private func applyAcknowledged(_ contents: inout PartitionContents, deferred: inout Deferred) {
        while let write = contents.inFlight[contents.nextToApply], let result = write.result {
            var stored = false
            if case .success(let offset) = result {
                if var fence = contents.fence {
                    if fence.fenced {
                        stored = false
                    } else if fence.checkingGap {
                        break
                    } else if offset > fence.expectedOffset {
                        fence.checkingGap = true
                        confirmation.store(0, ordering: .releasing)
                        contents.fence = fence
                        let (from, tag) = (fence.expectedOffset, fence.tag)
                        deferred.append { [self] in Self.gapReads.async { self.checkGap(from: from, to: offset, tag: tag, attempt: 0) } }
                        break
                    } else {
                        fence.expectedOffset = max(fence.expectedOffset, offset + 1)
                        fence.confirmedAt = Uptime.now
                        confirmation.store(fence.confirmedAt, ordering: .releasing)
                        fence.confirmedProducedAt = max(fence.confirmedProducedAt, write.producedAt)
                        contents.fence = fence
                        resumeConfirmed(&contents, deferred: &deferred)
                        stored = true
                    }
                } else {
                    stored = true
                }
            }
            let sequence = contents.nextToApply
            contents.inFlight[sequence] = nil
            contents.nextToApply += 1
            if stored, case .success(let offset) = result {
                contents.logEnd = max(contents.logEnd, offset + 1)
                if case .subscription(let subscription)? = write.record { contents.apply(subscription, sequence: sequence) }
            } else if case .failure(let error) = result,
                case .log(let suppressed) = Self.failureLog.decide(facility: "\(error.code)")
            {
                // Every write fails while the broker is away: one line per kind of error and interval.
                logger.error(
                    "state write failed",
                    metadata: [LoggingKeys.kafkaPartition: "\(partition)", LoggingKeys.error: "\(error)", LoggingKeys.suppressed: "\(suppressed)"])
            }
            if let created = write.creates, case .subscription(let subscription)? = write.record {
                contents.existingApp(subscription.app)?.reserve(created, by: -1)
            }
            if !write.uncounted, case .subscription(let subscription)? = write.record {
                let key = subscription.identity
                let left = (contents.pendingWrites[key] ?? 1) - 1
                contents.pendingWrites[key] = left > 0 ? left : nil
                if left <= 0, let waiters = contents.identityWaiters.removeValue(forKey: key) {
                    deferred.append { waiters.forEach { $0.resume() } }
                }
            }
            if !stored, case .failure(let error) = result, error.maybeStored, let onMaybeStored = write.onMaybeStored {
                deferred.append(onMaybeStored)
            }
            if let onSettled = write.onSettled {
                let outcome = stored
                deferred.append { onSettled(outcome) }
            }
        }
        if contents.inFlight.isEmpty, !contents.drainWaiters.isEmpty {
            let waiters = contents.drainWaiters
            contents.drainWaiters = []
            deferred.append { waiters.forEach { $0() } }
        }
        if let fence = contents.fence, !fence.waiters.isEmpty, !fence.fenced, !fence.checkingGap, !fence.checkScheduled {
            // Someone waits for a confirmation no write in flight will give (it failed): check again shortly.
            let latest = fence.waiters.values.map(\.after).max() ?? 0
            if !contents.inFlight.values.contains(where: { $0.producedAt >= latest }) {
                contents.fence?.checkScheduled = true
                deferred.append { [self] in DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { self.scheduledCheck() } }
            }
        }
    }

    private func scheduledCheck() {
        var deferred: Deferred = []
        contents.withLock { contents in
            guard let fence = contents.fence, fence.checkScheduled else { return }
            contents.fence?.checkScheduled = false
            let latest = fence.waiters.values.map(\.after).max() ?? 0
            guard !fence.waiters.isEmpty, !fence.fenced, !contents.inFlight.values.contains(where: { $0.producedAt >= latest }) else { return }
            produceOwnershipCheck(&contents, deferred: &deferred)
        }
        for action in deferred { action() }
    }

    // MARK: Fencing

    /// Reads back the gap `from..<to` before a write of this owner (tagged `tag`) that landed at `to`.
    private func checkGap(from: Int64, to: Int64, tag: [UInt8], attempt: Int) {
        let records = hooks.readRange(partition, from, to)
        let ownTags = contents.withLock { $0.ownTags }
        let verdict = records.map { GapVerdict.judge($0, tag: tag, ownTags: ownTags) } ?? .unreadable
        var deferred: Deferred = []
        var superseded = false
        contents.withLock { contents in
            guard var fence = contents.fence, fence.tag == tag, fence.checkingGap, !fence.fenced else { return }
            switch verdict {
            case .clear(let zombies):
                fence.checkingGap = false
                fence.expectedOffset = max(fence.expectedOffset, to)
                contents.fence = fence
                if !zombies.isEmpty {
                    logger.warning(
                        "records of an earlier owner found after this replica took the partition: rewritten from memory",
                        metadata: [LoggingKeys.kafkaPartition: "\(partition)", LoggingKeys.records: "\(zombies.count)"])
                    hooks.metrics?.zombieWritesRepaired(zombies.count)
                    let decoded = (records ?? []).filter { record in
                        record.key.map { key in zombies.contains(key) } ?? false
                    }.compactMap { record -> StateRecord? in
                        guard let key = record.key else { return nil }
                        return try? StateRecord.decode(key: key, value: record.value.isEmpty ? nil : record.value)
                    }
                    rewrite(decoded, in: &contents, deferred: &deferred)
                }
                applyAcknowledged(&contents, deferred: &deferred)
            case .newerOwner:
                superseded = true
                fence.checkingGap = false
                contents.fence = fence
                fenceLocked(&contents, deferred: &deferred)
            case .unreadable:
                // The broker is away: the writes wait (their callers time out); given up after a minute.
                if attempt >= 60 {
                    superseded = true
                    fence.checkingGap = false
                    contents.fence = fence
                    fenceLocked(&contents, deferred: &deferred)
                } else {
                    deferred.append { [self] in
                        Self.gapReads.asyncAfter(deadline: .now() + 1) { self.checkGap(from: from, to: to, tag: tag, attempt: attempt + 1) }
                    }
                }
            }
        }
        if superseded {
            logger.error(
                "another replica took this partition over (its load marker is in the state topic after this replica's): serving and writing it stopped",
                metadata: [LoggingKeys.kafkaPartition: "\(partition)", LoggingKeys.gapFrom: "\(from)", LoggingKeys.gapTo: "\(to)"])
            hooks.metrics?.ownershipFenced()
            // Before anyone waiting hears of it: the partition's events and deliveries are abandoned first, so
            // nothing of it is committed or released as done.
            hooks.fenced(partition)
        }
        for action in deferred { action() }
    }

    /// Superseded: nothing more is applied (the writes in flight fail: they landed after the newer owner's marker,
    /// which every reader skips), served or written; waiters hear no.
    private func fenceLocked(_ contents: inout PartitionContents, deferred: inout Deferred) {
        contents.fence?.fenced = true
        confirmation.store(0, ordering: .releasing)
        setRole(.released, in: &contents)
        let waiters = contents.fence?.waiters.values.map(\.continuation) ?? []
        contents.fence?.waiters = [:]
        deferred.append { waiters.forEach { $0.resume(returning: false) } }
        for sequence in contents.inFlight.keys where contents.inFlight[sequence]?.result == nil {
            contents.inFlight[sequence]?.result = .failure(KafkaError(message: "superseded by another owner of the partition"))
        }
        applyAcknowledged(&contents, deferred: &deferred)
    }

    /// Resumes the confirmation waiters satisfied by the fence's latest confirmation.
    private func resumeConfirmed(_ contents: inout PartitionContents, deferred: inout Deferred) {
        guard let fence = contents.fence, !fence.waiters.isEmpty else { return }
        let ready = fence.waiters.filter { $0.value.after <= fence.confirmedProducedAt }
        guard !ready.isEmpty else { return }
        for id in ready.keys { contents.fence?.waiters[id] = nil }
        deferred.append { ready.values.forEach { $0.continuation.resume(returning: true) } }
    }

    /// Writes an ownership check: a record whose landing where expected confirms that nobody took the partition.
    private func produceOwnershipCheck(_ contents: inout PartitionContents, deferred: inout Deferred) {
        let write = InFlightWrite(record: nil, onSettled: nil, uncounted: true)
        submit(write, key: OwnerTag.ownerCheckKey, value: [], in: &contents, deferred: &deferred)
    }

    /// True once a write produced at or after `instant` landed where this owner expected it: no other owner had
    /// taken the partition then, so what this replica decided before `instant` stands. False when it is not the
    /// owner, was superseded, or no confirmation came within `timeout` (the broker is away).
    func confirmOwnership(after instant: UInt64, timeout: Double = 5) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            var deferred: Deferred = []
            let answer = contents.withLock { contents -> Bool? in
                guard contents.role == .owner else { return false }
                guard var fence = contents.fence else { return true }
                guard !fence.fenced else { return false }
                if fence.confirmedProducedAt >= instant { return true }
                fence.nextWaiter += 1
                let id = fence.nextWaiter
                fence.waiters[id] = (instant, continuation)
                contents.fence = fence
                let covered = contents.inFlight.values.contains { $0.producedAt >= instant }
                if !covered, !fence.checkingGap { produceOwnershipCheck(&contents, deferred: &deferred) }
                deferred.append { [self] in
                    DispatchQueue.global().asyncAfter(deadline: .now() + timeout) {
                        let waiter = self.contents.withLock { $0.fence?.waiters.removeValue(forKey: id) }
                        waiter?.continuation.resume(returning: false)
                    }
                }
                return nil
            }
            for action in deferred { action() }
            if let answer { continuation.resume(returning: answer) }
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

    /// Rewrites, from memory, the keys of records written by a superseded owner (the caller holds the lock):
    /// subscriptions as memory has them (live, revoked marker or tombstone), shadows with the data memory holds,
    /// pending-retry lines through the delivery service.
    private func rewrite(_ records: [StateRecord], in contents: inout PartitionContents, deferred: inout Deferred) {
        for record in records {
            switch record {
            case .subscription(let subscription):
                let key = subscription.identity
                if contents.repairs.insert(key).inserted {
                    deferred.append { [self] in repair(key, delay: 0.5) }
                }
            case .shadow(let shadow):
                guard let value = contents.existingApp(shadow.app)?.index.shadow(at: shadow.path) else { continue }
                produce(.shadow(ShadowRecord(app: shadow.app, path: shadow.path, value: value)), in: &contents, onSettled: nil, deferred: &deferred)
            case .retry(let retry):
                let key = retry.key
                deferred.append { [hooks] in hooks.rewriteRetryLine(key) }
            }
        }
    }

    /// Makes a decision under the lock and writes the records it implies; returns its value once they are
    /// durable and applied. With an `identity`, waits first for the writes of that subscription still in
    /// flight (one decision at a time per subscription). A decision that writes nothing answers once this
    /// replica's ownership is confirmed after it. 503 when this replica is not the owner (with `notOwner`, so a
    /// forwarding replica asks the new owner), or when the records could not be stored.
    func write<Value: Sendable>(
        identity: RetryKey?, _ decide: (inout PartitionContents) throws(APIError) -> (records: [StateRecord], value: Value)
    ) async throws(APIError) -> Value {
        while true {
            if let identity { await waitForWrites(of: identity) }
            var deferred: Deferred = []
            let attempt = contents.withLock { contents -> Result<(Value, Settlement?)?, APIError> in
                guard contents.role == .owner, contents.fence?.fenced != true else {
                    return .failure(.notOwner("the application's partition is moving to another replica; retry"))
                }
                if let identity, (contents.pendingWrites[identity] ?? 0) > 0 { return .success(nil) }
                do throws(APIError) {
                    let (records, value) = try decide(&contents)
                    guard !records.isEmpty else { return .success((value, nil)) }
                    let settlement = Settlement(count: records.count)
                    for record in records {
                        produce(
                            record, in: &contents, counted: true, onSettled: { settlement.settle($0) },
                            onMaybeStored: { settlement.markMaybeStored() }, deferred: &deferred)
                    }
                    return .success((value, settlement))
                } catch {
                    return .failure(error)
                }
            }
            for action in deferred { action() }
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
                    if contents.withLock({ $0.fence?.fenced == true }) {
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
        let value = contents.withLock { contents -> Value? in
            guard contents.role == .owner else { return nil }
            return body(&contents)
        }
        guard let value, await ensureOwnership() else {
            throw .notOwner("the application's partition is moving to another replica; retry")
        }
        return value
    }

    private func waitForWrites(of identity: RetryKey) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waiting = contents.withLock { contents -> Bool in
                guard (contents.pendingWrites[identity] ?? 0) > 0 else { return false }
                contents.identityWaiters[identity, default: []].append(continuation)
                return true
            }
            if !waiting { continuation.resume() }
        }
    }

    /// Writes records that only checkpoint what memory already holds (shadows, pending retries): nothing is
    /// applied on acknowledgement. `onSettled` reports whether they were stored.
    func checkpoint(_ records: [StateRecord], onSettled: (@Sendable (Bool) -> Void)? = nil) {
        guard !records.isEmpty else { return }
        var deferred: Deferred = []
        var settle: (@Sendable (Bool) -> Void)?
        if let onSettled {
            let settlement = Settlement(count: records.count, completion: onSettled)
            settle = { settlement.settle($0) }
        }
        contents.withLock { contents in
            for record in records { produce(record, in: &contents, onSettled: settle, deferred: &deferred) }
        }
        for action in deferred { action() }
    }

    /// Blocks the calling thread until every write in flight is acknowledged (before the partition is given
    /// up), at most `timeout`. True when none is left.
    func waitForWrites(timeout: Duration) -> Bool {
        let done = DispatchSemaphore(value: 0)
        let empty = contents.withLock { contents -> Bool in
            if contents.inFlight.isEmpty { return true }
            contents.drainWaiters.append { done.signal() }
            return false
        }
        if empty { return true }
        return done.wait(timeout: .now() + timeout.seconds) == .success
    }

    // MARK: Repairs

    /// Writes the record of `key` as memory has it (live, revoked marker or tombstone) after `delay` seconds,
    /// until it is stored or the partition is given up. One chain per key: a repair scheduled while one is
    /// pending is merged into it, so a broker outage never multiplies the records written.
    func scheduleRepair(_ key: RetryKey, delay: Double) {
        let first = contents.withLock { $0.repairs.insert(key).inserted }
        guard first else { return }
        let jittered = delay * Double.random(in: 0.8...1.2)
        DispatchQueue.global().asyncAfter(deadline: .now() + jittered) { [self] in repair(key, delay: delay) }
    }

    /// Runs `action` once the pending repair of `key` is stored.
    func afterRepair(_ key: RetryKey, _ action: @escaping @Sendable () -> Void) {
        contents.withLock { $0.repairWaiters[key, default: []].append(action) }
    }

    private func repair(_ key: RetryKey, delay: Double) {
        var deferred: Deferred = []
        contents.withLock { contents in
            contents.repairs.remove(key)
            guard contents.role.isActive else { return }
            // A write of this subscription is in flight: memory does not show it yet, so a record written now
            // from memory would land after it and undo it (an acknowledged create lost). Later, once it is applied.
            if (contents.pendingWrites[key] ?? 0) > 0 {
                deferred.append { [self] in scheduleRepair(key, delay: delay) }
                return
            }
            let record: SubscriptionRecord
            if let settings = contents.existingApp(key.app)?.index.subscription(path: key.path, subscriber: key.subscriber) {
                record = SubscriptionRecord(app: key.app, subscription: Subscription(path: key.path, subscriber: key.subscriber, settings: settings))
            } else if let revoked = contents.revoked[key], !revoked.tombstoned {
                record = .revocation(app: key.app, subscription: revoked.subscription, reason: revoked.reason)
            } else {
                record = .deletion(app: key.app, path: key.path, subscriber: key.subscriber)
            }
            produceUncountedRepair(.subscription(record), key: key, delay: delay, in: &contents, deferred: &deferred)
        }
        for action in deferred { action() }
    }

    private func produceUncountedRepair(
        _ record: StateRecord, key: RetryKey, delay: Double, in contents: inout PartitionContents, deferred: inout Deferred
    ) {
        let write = InFlightWrite(
            record: record,
            onSettled: { [self] stored in
                if stored {
                    let waiting = self.contents.withLock { $0.repairWaiters.removeValue(forKey: key) ?? [] }
                    waiting.forEach { $0() }
                } else {
                    scheduleRepair(key, delay: min(delay * 2, 30))
                }
            }, uncounted: true)
        submit(write, key: record.key, value: record.value ?? [], in: &contents, deferred: &deferred)
    }

    // MARK: Revocations

    /// Revokes `subscriptions` of `app` now (the caller holds the lock): removed from matching at once, their
    /// revoke messages queued behind what they already had, their markers produced. Returns the revoke
    /// notifications to queue (in the caller's order). `onMarker` settles once per marker.
    private func revokeLocked(
        _ subscriptions: [Subscription], app: AppData, reason: RevocationReason, in contents: inout PartitionContents,
        onMarker: (@Sendable (Bool) -> Void)?, deferred: inout Deferred, now: Double
    ) -> [PendingNotification] {
        var revokes: [PendingNotification] = []
        for subscription in subscriptions {
            app.index.unsubscribe(path: subscription.path, subscriber: subscription.subscriber)
            let key = RetryKey(app: app.name, path: subscription.path, subscriber: subscription.subscriber)
            contents.revoked[key] = RevokedSubscription(
                app: app.name, reason: reason, subscription: subscription, markerSequence: contents.nextSequence)
            produce(
                .subscription(.revocation(app: app.name, subscription: subscription, reason: reason)), in: &contents,
                onSettled: onMarker, deferred: &deferred)
            revokes.append(
                PendingNotification(
                    app: app.name, path: subscription.path, subscriber: subscription.subscriber,
                    format: subscription.settings.format, content: .revoke(reason), scope: app.name, firstFailureAt: now))
        }
        return revokes
    }

    /// Revokes, now, the subscriptions `select` picks in `app` for each reason (the settings-driven
    /// revocations: expired, disabled, rules, a lowered shadow limit); `select` runs under the lock and may
    /// record what it checked in the app's data. Returns how many per reason, and the offset of the last change
    /// event matched before this revocation point.
    func revoke(
        app name: String, delivery: any DeliveryInput, now: Double,
        select: (AppData) -> [(RevocationReason, [Subscription])]
    ) -> (counts: [(RevocationReason, Int)], afterOffset: Int64) {
        var deferred: Deferred = []
        let result = contents.withLock { contents -> ([(RevocationReason, Int)], Int64) in
            guard contents.role == .owner, let app = contents.existingApp(name) else { return ([], contents.lastEventOffset) }
            var counts: [(RevocationReason, Int)] = []
            var revokes: [PendingNotification] = []
            var done: Set<RetryKey> = []
            for (reason, chosen) in select(app) {
                let fresh = chosen.filter { done.insert(RetryKey(app: name, path: $0.path, subscriber: $0.subscriber)).inserted }
                guard !fresh.isEmpty else { continue }
                revokes += revokeLocked(
                    fresh, app: app, reason: reason, in: &contents, onMarker: nil, deferred: &deferred, now: now)
                counts.append((reason, fresh.count))
            }
            delivery.enqueue(revokes)
            return (counts, contents.lastEventOffset)
        }
        for action in deferred { action() }
        return result
    }

    /// The apps present in this partition.
    var appNames: [String] { contents.withLock { $0.apps.values.map(\.name) } }

    /// The revoke of `key` was delivered (or discarded at its deadline): writes the tombstone, unless the
    /// subscription was made again since (it is not revoked any more) or a write about it is in flight.
    func finalizeRevocation(_ key: RetryKey) {
        var deferred: Deferred = []
        contents.withLock { contents in
            guard contents.role.isActive, let revoked = contents.revoked[key], !revoked.tombstoned,
                (contents.pendingWrites[key] ?? 0) == 0
            else { return }
            contents.revoked[key]?.tombstoned = true
            produce(
                .subscription(.deletion(app: key.app, path: key.path, subscriber: key.subscriber)), in: &contents,
                onSettled: nil, deferred: &deferred)
        }
        for action in deferred { action() }
    }

    /// The provider says `key`'s token is dead: the subscription is deleted (no revoke message: nothing can
    /// reach the device).
    func deleteDeadToken(_ key: RetryKey) {
        var deferred: Deferred = []
        contents.withLock { contents in
            guard contents.role.isActive else { return }
            contents.existingApp(key.app)?.index.unsubscribe(path: key.path, subscriber: key.subscriber)
            contents.revoked[key] = nil
            produce(
                .subscription(.deletion(app: key.app, path: key.path, subscriber: key.subscriber)), in: &contents,
                onSettled: nil, deferred: &deferred)
        }
        for action in deferred { action() }
    }

    // MARK: Events

    /// What matching one event did.
    struct EventOutcome {
        var notifications = 0
        /// Revoked by the event itself (`too_big`, `namespace_does_not_exist`).
        var revoked = 0
        /// Revoked as `expired` before the event was matched.
        var expired = 0
        /// The offset of the last change event matched before this one: the revocation point of both.
        var afterOffset: Int64 = -1
    }

    /// Matches one change event (on the consumer's thread, in log order) under the lock: revokes the app's
    /// subscriptions expired by `now` first (so an expiry's revocation point is exact: matching skips them
    /// from here on), updates the shadows, revokes what the event makes invalid (`too_big`,
    /// `namespace_does_not_exist`), queues every notification for delivery in this order, and checkpoints the
    /// changed shadows. Each notification and each state write holds `ticket` until it is settled.
    func process(
        _ event: ChangeEvent, offset: Int64, profile: AppProfile, now: Int64, eventTime: Double?, ticket: UInt64,
        tickets: EventTickets, delivery: any DeliveryInput, payloads: PayloadBuilder
    ) -> EventOutcome {
        var deferred: Deferred = []
        let clock = Double(now)
        let limit = profile.settings.shadowMaxBytes
        let outcome = contents.withLock { contents -> EventOutcome in
            guard contents.role == .owner else { return EventOutcome() }
            let app = contents.app(event.app)
            var revokes: [PendingNotification] = []
            var markers = 0
            // Expiry takes effect at a point too: what has expired by `now` is revoked before this event is
            // matched (matching skips it from now on), not silently skipped until the next sweep.
            let expired = app.index.expiredSubscriptions(now: now)
            let afterOffset = contents.lastEventOffset
            if !expired.isEmpty {
                markers += expired.count
                revokes += revokeLocked(
                    expired, app: app, reason: .expired, in: &contents, onMarker: { _ in tickets.release(ticket) },
                    deferred: &deferred, now: clock)
            }
            contents.lastEventOffset = offset
            app.dataReplaced(at: event.path)
            var matched = app.index.apply(event, now: now)
            var checkpoints: [StateRecord] = []
            // NAMESPACE_DELETED: the index removed everything and returned the revocations.
            if event.operation == .namespaceDeleted {
                let removed = matched.flatMap { notification in
                    notification.recipients.map { recipient in (notification.path, recipient) }
                }
                matched = []
                for (path, recipient) in removed {
                    let subscription = Subscription(
                        path: path, subscriber: recipient.subscriber,
                        settings: SubscriptionSettings(mode: .noData, format: recipient.format, expiresAt: 0))
                    markers += 1
                    let key = RetryKey(app: app.name, path: path, subscriber: recipient.subscriber)
                    revokes += revokeLocked(
                        [subscription], app: app, reason: .namespaceDoesNotExist, in: &contents,
                        onMarker: markerSettled(key, ticket: ticket, tickets: tickets), deferred: &deferred, now: clock)
                }
            }
            for (path, value) in app.index.changedShadows {
                let record = ShadowRecord(app: event.app, path: path, value: value)
                guard record.exceeds(limit: limit) else {
                    checkpoints.append(.shadow(record))
                    continue
                }
                // The node's data outgrew the app's limit: its value/childEvent subscriptions are revoked, and
                // get the revocation instead of this event's notification.
                let gone = app.index.dataSubscriptions(at: path)
                let goneSubscribers = Set(gone.map(\.subscriber))
                matched = matched.compactMap { notification in
                    guard notification.path == path else { return notification }
                    var kept = notification
                    kept.recipients.removeAll { goneSubscribers.contains($0.subscriber) }
                    return kept.recipients.isEmpty ? nil : kept
                }
                markers += gone.count
                for subscription in gone {
                    let key = RetryKey(app: app.name, path: subscription.path, subscriber: subscription.subscriber)
                    revokes += revokeLocked(
                        [subscription], app: app, reason: .tooBig, in: &contents,
                        onMarker: markerSettled(key, ticket: ticket, tickets: tickets), deferred: &deferred, now: clock)
                }
                app.markOversized(path)
            }
            var queued: [PendingNotification] = []
            for notification in matched {
                var v1Bytes: [UInt8]?
                for recipient in notification.recipients {
                    var bytes: [UInt8]?
                    if recipient.format == .v1 {
                        if v1Bytes == nil {
                            v1Bytes = payloads.payload(
                                profile: profile, path: notification.path, subscriber: recipient.subscriber, format: .v1,
                                content: notification.content)
                        }
                        guard let v1Bytes else { continue }
                        bytes = v1Bytes
                    }
                    var pending = PendingNotification(
                        app: app.name, path: notification.path, subscriber: recipient.subscriber, format: recipient.format,
                        content: notification.content, scope: app.name, origin: event.eventID, firstFailureAt: clock)
                    pending.payload = bytes
                    pending.holds = [ticket]
                    pending.eventTime = eventTime
                    queued.append(pending)
                }
            }
            tickets.retain(ticket, count: queued.count + markers + checkpoints.count)
            // Notifications first (they were decided before the revocations this event caused), then revokes.
            delivery.enqueue(queued + revokes)
            for record in checkpoints {
                produce(record, in: &contents, onSettled: { [self] stored in
                    if stored {
                        tickets.release(ticket)
                    } else if case .shadow(let shadow) = record {
                        retryCheckpoint(app: shadow.app, path: shadow.path, ticket: ticket, tickets: tickets, delay: 1)
                    }
                }, deferred: &deferred)
            }
            return EventOutcome(
                notifications: queued.count, revoked: revokes.count - expired.count, expired: expired.count,
                afterOffset: afterOffset)
        }
        for action in deferred { action() }
        return outcome
    }

    /// The event's ticket waits for a revocation marker it caused to be stored (repaired when it was not).
    private func markerSettled(_ key: RetryKey, ticket: UInt64, tickets: EventTickets) -> @Sendable (Bool) -> Void {
        { [self] stored in
            if stored { tickets.release(ticket) } else { afterRepair(key) { tickets.release(ticket) } }
        }
    }

    /// A shadow checkpoint was not stored: writes the node's current data again after `delay` seconds (the
    /// event's offset waits meanwhile), until it is stored or the partition is given up.
    private func retryCheckpoint(app: String, path: DataPath, ticket: UInt64, tickets: EventTickets, delay: Double) {
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [self] in
            var deferred: Deferred = []
            let retried = contents.withLock { contents -> Bool in
                guard contents.role.isActive else { return false }
                let value = contents.existingApp(app)?.index.shadow(at: path) ?? .null
                produce(
                    .shadow(ShadowRecord(app: app, path: path, value: value)), in: &contents,
                    onSettled: { [self] stored in
                        if stored {
                            tickets.release(ticket)
                        } else {
                            retryCheckpoint(app: app, path: path, ticket: ticket, tickets: tickets, delay: min(delay * 2, 30))
                        }
                    }, deferred: &deferred)
                return true
            }
            for action in deferred { action() }
            if !retried { logger.debug("shadow checkpoint dropped: the partition moved", metadata: [LoggingKeys.app: "\(app)"]) }
        }
    }
}
