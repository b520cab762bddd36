import Foundation
import GatewayCore
import GatewayLogging
import Logging
import Providers
import PushCore
import Synchronization

/// What the lanes of one ``DeliveryService`` share: the services a delivery reaches, its policy and clock, and the
/// replica-wide counts (``DeliveryTotals``). Nothing in it is a lock the lanes take on every notification.
struct DeliveryContext: Sendable {
    let profiles: AppProfiles
    let store: StateStore
    let tickets: EventTickets
    let payloads: PayloadBuilder
    let metrics: GatewayMetrics
    let latencies: GatewayLatencyRecorders
    let board: AppStatusBoard?
    let logger: Logger
    let policy: RetryPolicy
    let clock: @Sendable () -> Double
    let totals: DeliveryTotals
}

/// The replica-wide counts of the delivery lanes, in atomics: the notifications in flight, bounded by
/// `maxInFlight` for all lanes together, and those queued (the gauges' sums).
///
/// A lane's turn claims the free places it might use (``claimFree(atMost:)``), takes at most that many due
/// notifications, and gives back what it did not use (``add(inFlight:queued:)``): the total never passes the bound. A lane that found
/// no free place is woken when places come back.
final class DeliveryTotals: Sendable {
    let maxInFlight: Int
    private let inFlight = Atomic<Int>(0)
    private let queued = Atomic<Int>(0)
    private let starved = Atomic<Bool>(false)
    private let signals: [WakeSignal]

    init(maxInFlight: Int, signals: [WakeSignal]) {
        self.maxInFlight = maxInFlight
        self.signals = signals
    }

    var inFlightCount: Int { inFlight.load(ordering: .relaxed) }
    var queuedCount: Int { queued.load(ordering: .relaxed) }

    /// Claims the places free now, at most `wanted` (0 when none: the lane is then woken when some come back).
    func claimFree(atMost wanted: Int) -> Int {
        guard wanted > 0 else { return 0 }
        var current = inFlight.load(ordering: .relaxed)
        while true {
            let free = min(wanted, maxInFlight - current)
            guard free > 0 else {
                starved.store(true, ordering: .relaxed)
                return 0
            }
            let (exchanged, original) = inFlight.compareExchange(expected: current, desired: current + free, ordering: .relaxed)
            if exchanged { return free }
            current = original
        }
    }

    /// Adds a lane's changes; places given back wake the lanes that found none.
    func add(inFlight delta: Int, queued queuedDelta: Int) {
        if queuedDelta != 0 { queued.add(queuedDelta, ordering: .relaxed) }
        guard delta != 0 else { return }
        inFlight.add(delta, ordering: .relaxed)
        if delta < 0, starved.load(ordering: .relaxed), starved.exchange(false, ordering: .relaxed) {
            for signal in signals { signal.signal() }
        }
    }
}

/// One lane of the delivery service: a ``DeliveryQueue`` with the lines it stores and their writes, under its own
/// lock, and its own send loop (``WakeSignal/runDueLoop(clock:turn:afterTurn:send:)``). Every line of a
/// subscription, and every notification counted in one admission scope (an FCM project, an HMS app, an app's
/// webhooks), is in the same lane (``DeliveryService``), so what the queue keeps per subscription (order, one in
/// flight, retries in place, revoke last) and per project (in-flight limit, pace, the pause after its quota) holds as
/// in one queue. Lanes share only the replica-wide in-flight bound and the gauges' sums (``DeliveryTotals``,
/// atomics).
///
/// The lane reads the apps' settings through its own ``AppProfiles/Reader``, under its lock: the queue's admissions
/// and pause scopes, and the profile a due notification is sent with, which is looked up when it is handed out (a
/// retry, or a line adopted from the state topic, is sent with the settings current then).
final class DeliveryLane: Sendable {
    private struct Core {
        var queue: DeliveryQueue
        /// The lane's reader of the apps' settings (shared with the queue's functions; used under the lane's lock).
        let profiles: AppProfiles.Reader
        /// Lines that have a `retry` record in the state topic (an empty line then needs a tombstone).
        var stored: Set<RetryKey> = []
        /// Lines whose record must be (re)written, now or after the backoff of a failed write.
        var writes = RetryLineWrites()
        /// Holds taken from lines whose write failed: released by the next successful write of the line.
        var unreleased: [RetryKey: [UInt64]] = [:]
        var stopping = false
        /// What this lane has added to the shared totals (``DeliveryTotals``).
        var countedInFlight = 0
        var countedQueued = 0

        /// Brings the shared totals to the queue's counts; `claimed`: places claimed for this turn, added already.
        mutating func settle(_ totals: DeliveryTotals, claimed: Int = 0) {
            let (inFlight, queued) = (queue.inFlightCount, queue.count)
            totals.add(inFlight: inFlight - countedInFlight - claimed, queued: queued - countedQueued)
            (countedInFlight, countedQueued) = (inFlight, queued)
        }

        /// The lines to write now (changed, and past a failed write's backoff at `now`), with their entries and the
        /// holds their write releases.
        mutating func takeReadyWrites(now: Double) -> [LineWrite] {
            writes.takeReady(now: now).map { key in
                let holds = queue.takeHolds(forSubscription: key) + (unreleased.removeValue(forKey: key) ?? [])
                return LineWrite(key: key, entries: queue.pending(for: key), holds: holds)
            }
        }
    }

    /// A due notification, with its app's settings when it was handed out (nil: none, not sent).
    private struct Send: Sendable {
        let entry: PendingNotification
        let profile: AppProfile?
    }

    /// A line's record to write: its entries (none: a tombstone) and the holds its write releases once stored.
    private struct LineWrite: Sendable {
        let key: RetryKey
        let entries: [PendingNotification]
        let holds: [UInt64]
    }

    let index: Int
    private let core: Mutex<Core>
    private let wake: WakeSignal
    private let context: DeliveryContext

    init(index: Int, wake: WakeSignal, context: DeliveryContext) {
        self.index = index
        self.wake = wake
        self.context = context
        // A webhook waits for its destination host's place in the queue, not in a sending place; a notification
        // through FCM or HMS waits there for its project's send rate and a place of its requests in flight, and
        // is held back by its project's pause (a quota), whichever app it is of.
        let profiles = AppProfiles.Reader(context.profiles)
        let queue = DeliveryQueue(
            admissions: { entry in profiles.profile(entry.app)?.admissions(for: entry.subscriber) ?? [] },
            pauseScope: { entry in AppProfile.admissionScope(of: entry.key, profile: profiles.profile(entry.app)) })
        self.core = Mutex(Core(queue: queue, profiles: profiles))
    }

    private var totals: DeliveryTotals { context.totals }

    // MARK: Inputs (from the service)

    /// Queues `notifications` (of this lane), each behind its subscription's line.
    func enqueue(_ notifications: [PendingNotification], fetchedAt: UInt64, now: Double) {
        let released = core.withLock { core -> [UInt64] in
            for var notification in notifications {
                notification.fetchedAt = fetchedAt
                let key = notification.key
                let stored = core.queue.isBackingOff(key) || core.stored.contains(key)
                    || (core.queue.pausedUntil(notification) ?? 0) > now
                core.queue.enqueue(notification)
                // Behind a backing-off (or paused) line: stored with it, so that the event need not wait.
                if stored { core.writes.markChanged(key) }
            }
            core.settle(totals)
            return core.queue.takeReleasedHolds()
        }
        context.tickets.release(released)
        wake.signal()
    }

    /// Takes over stored lines and revokes of a previous owner (their first attempt of a revoke is `now`).
    func adopt(lines: [[PendingNotification]], revokes: [PendingNotification], now: Double) {
        core.withLock { core in
            for line in lines {
                for entry in line { core.queue.enqueue(entry) }
                if let key = line.first?.key { core.stored.insert(key) }
            }
            for var revoke in revokes {
                (revoke.firstFailureAt, revoke.notBefore) = (now, now)
                core.queue.enqueue(revoke)
            }
            core.settle(totals)
        }
        wake.signal()
    }

    /// Drops the lines whose key `given` selects (their partition was given up). A send in flight finishes, its
    /// outcome ignored.
    func release(where given: @Sendable (RetryKey) -> Bool) {
        core.withLock { core in
            core.queue.removeAll(where: given)
            _ = core.queue.takeReleasedHolds()
            core.stored = core.stored.filter { !given($0) }
            core.writes.removeAll(where: given)
            core.unreleased = core.unreleased.filter { !given($0.key) }
            core.settle(totals)
        }
    }

    /// `key`'s line is written again (``DeliveryService/rewrite(line:)``).
    func rewrite(line key: RetryKey) {
        core.withLock { $0.writes.markChanged(key) }
        wake.signal()
    }

    /// The lane stops handing out sends; its loop ends once those in flight finished.
    func stop() {
        core.withLock { $0.stopping = true }
        wake.signal()
    }

    // MARK: Reading

    /// `app`'s notifications queued in this lane and those in lines that back off.
    func status(app: String) -> (queued: Int, retrying: Int) {
        core.withLock { core in
            var queued = 0
            var retrying = 0
            for key in core.queue.keys where key.app.bytesEqual(app) {
                let count = core.queue.pending(for: key).count
                queued += count
                if core.queue.isBackingOff(key) { retrying += count }
            }
            return (queued, retrying)
        }
    }

    /// The end of the pause of the admission scope `scope` (a project's quota) in this lane, if one was set (it
    /// may be over). A scope's pause is set only in its lane (``DeliveryService/laneIndex(scope:lanes:)``).
    func pausedUntil(scope: String) -> Double? { core.withLock { $0.queue.pausedUntil(scope: scope) } }

    /// The pace `key` has in this lane (nil before its first send) and the notifications waiting for it.
    func pace(_ key: String) -> (pace: DeliveryQueue.Pace?, waiting: Int) {
        core.withLock { ($0.queue.pace(key), $0.queue.waitingCount(pace: key)) }
    }

    // MARK: The loop

    /// Sends what is due until stopped, then stores what changed.
    func run() async {
        let clock = context.clock
        let metrics = context.metrics
        // The lines to store, taken under the turn's lock (not a second one per turn) and written after its sends.
        var ready: [LineWrite] = []
        await wake.runDueLoop(
            clock: clock,
            turn: { now in
                let (due, stopping, next, paced, waiting) = core.withLock {
                    core -> ([Send], Bool, Double?, [String: Int], [String: Int]) in
                    // At most one head per line that has none in flight.
                    let claimed = core.stopping ? 0 : totals.claimFree(atMost: core.queue.subscriptionCount - core.queue.inFlightCount)
                    let due = claimed > 0 ? core.queue.due(now: now, limit: claimed) : []
                    let sends = due.map { Send(entry: $0, profile: core.profiles.profile($0.app)) }
                    core.settle(totals, claimed: claimed)
                    // Also woken at the end of a failed line write's backoff.
                    let next = [core.queue.nextWakeUp, core.writes.nextWakeUp].compactMap { $0 }.min()
                    ready = core.takeReadyWrites(now: now)
                    return (sends, core.stopping, next, core.queue.takePacedSends(), core.queue.takeWaitingForPaceChanges())
                }
                for (project, count) in paced { metrics.sendsPaced(project: project, count: count) }
                for (project, count) in waiting { metrics.waitingForPace(project: project, count: count) }
                return (due, stopping, next)
            },
            afterTurn: {
                write(ready)
                ready = []
            },
            send: { send in await self.deliver(send.entry, profile: send.profile) })
        // Sends in flight have finished: store what changed (backoffs cut short: a last attempt).
        write(core.withLock { $0.takeReadyWrites(now: .infinity) })
    }

    // MARK: Sending

    /// Sends `entry` with `profile`, its app's settings when it was handed out.
    private func deliver(_ entry: PendingNotification, profile: AppProfile?) async {
        let key = entry.key
        let (store, metrics) = (context.store, context.metrics)
        guard let profile, let sender = profile.sender(for: entry.subscriber.kind) else {
            // Settings or provider gone: our side. Retried later (within the 2-hour limit), nobody revoked.
            return failed(key, entry, DeliveryFailure(reason: "no_provider", classification: .ourFault), provider: "none", profile: profile)
        }
        // A retry of data for a subscription the user deleted meanwhile is dropped. (A revoked one keeps it:
        // what was decided before its revocation point is delivered before its revoke.)
        if entry.attempt > 0, !entry.isRevoke,
            store.activePartition(ofApp: entry.app)?.withContents({ contents in
                contents.existingApp(entry.app)?.index.subscription(path: entry.path, subscriber: entry.subscriber) != nil
                    || contents.revoked[key] != nil
            }) == false
        {
            metrics.retryOutcome("dropped_unsubscribed")
            return completed(key)
        }
        // Sent only while this replica's ownership of the partition is current: a replica that was frozen, or cut
        // off from the group, must not notify for a partition another replica has taken (``OwnershipFence``).
        if let partition = store.partition(store.partitionIndex(ofApp: entry.app)), !partition.ownershipIsCurrent {
            guard await partition.ensureOwnership() else {
                if partition.role == .owner {
                    // Not confirmed in time (the broker is away): like any transient failure.
                    return failed(
                        key, entry, DeliveryFailure(reason: "ownership_unconfirmed", classification: .retryable), provider: "none",
                        profile: profile)
                }
                // Given up (superseded, or revoked): the new owner consumes the events again and delivers. Nothing
                // is released: the event's offset must not move here.
                metrics.retryOutcome("dropped_not_owner")
                core.withLock { core in
                    _ = core.queue.completed(key)
                    _ = core.queue.takeReleasedHolds()
                    core.settle(totals)
                }
                // Its places are free: the lines set aside for them may go now (the loop may sleep until told).
                setGauges()
                return wake.signal()
            }
        }
        guard
            let payload = entry.payload
                ?? context.payloads.payload(
                    profile: profile, path: entry.path, subscriber: entry.subscriber, format: entry.format,
                    encryption: entry.encryption, content: entry.content)
        else {
            return completed(key)  // cannot be built (over 4093 bytes even without data): counted, dropped
        }
        guard let options = DeliveryOptions.of(entry, now: context.clock()) else {
            // A user notification whose TTL ran out while it was retried: the publisher no longer wants it sent.
            metrics.retryOutcome("expired")
            return completed(key)
        }
        let messageID = entry.subscriber.kind == .webhook ? WebhookSender.messageID(origin: entry.origin, body: payload) : ""
        let outcome = await sender.send(
            token: entry.subscriber.token, payload: payload, messageID: messageID, options: options,
            submission: submission(entry, provider: sender.provider))
        switch outcome {
        case .sent:
            metrics.notificationSent(provider: sender.provider)
            context.board?.sent(app: entry.app, project: sender.project)
            if entry.attempt > 0 { metrics.retryOutcome("delivered") }
            if let time = entry.eventTime, entry.attempt == 0 { metrics.latency.record(max(0, context.clock() - time)) }
            completed(key)
        case .failed(let failure):
            metrics.notificationFailed(provider: sender.provider, failure: failure)
            // On the status board once the queue has the outcome: a status that shows this error shows the line
            // backing off too (read between the two, it showed the error with the line not yet retrying).
            defer { context.board?.failed(app: entry.app, project: sender.project, failure: failure) }
            if failure.classification == .tokenDead {
                tokenDead(
                    key,
                    answer: ProviderAnswer(provider: sender.provider, httpStatus: failure.httpStatus, code: failure.reason, message: failure.message))
            } else if failure.classification == .rejected {
                // The receiver (a webhook, a push service, APNs) refused this message, not the subscription (too big,
                // a refused address): dropped (counted above), the line moves on, nobody revoked.
                context.logger.warning(
                    "the receiver refused this notification: dropped, the subscription stays",
                    metadata: [LoggingKeys.app: "\(entry.app)", LoggingKeys.provider: "\(sender.provider)", LoggingKeys.reason: "\(failure.reason)"])
                if entry.attempt > 0 { metrics.retryOutcome("rejected") }
                completed(key)
            } else {
                failed(key, entry, failure, provider: sender.provider, profile: profile)
            }
        }
    }

    /// The first attempt of a notification from a fetched record records the gateway's own latency when the sender
    /// hands its request to the HTTP client (``RequestSubmission``); a retry (or an adopted line) records nothing.
    private func submission(_ entry: PendingNotification, provider: String) -> RequestSubmission? {
        guard entry.attempt == 0, entry.fetchedAt != 0 else { return nil }
        return RequestSubmission(fetchedAt: entry.fetchedAt, observer: context.latencies.recorder(provider: provider))
    }

    private func completed(_ key: RetryKey) {
        let (done, released) = core.withLock { core -> (PendingNotification?, [UInt64]) in
            let done = core.queue.completed(key)
            if core.stored.contains(key) { core.writes.markChanged(key) }
            core.settle(totals)
            return (done, core.queue.takeReleasedHolds())
        }
        context.tickets.release(released + (done?.holds ?? []))
        if let done, done.isRevoke { context.store.activePartition(ofApp: key.app)?.finalizeRevocation(key) }
        setGauges()
        wake.signal()
    }

    /// `entry` failed when sent with `profile` (its app's settings then). A project's quota (`QUOTA_EXCEEDED`)
    /// pauses that project (the admission scope of the line, whose notifications are all in this lane), every app
    /// sending through it, until the line's retry.
    private func failed(
        _ key: RetryKey, _ entry: PendingNotification, _ failure: DeliveryFailure, provider: String, profile: AppProfile?
    ) {
        if failure.classification == .ourFault {
            context.logger.error(
                "the provider refused our request or credentials: nobody is revoked, the notification is retried",
                metadata: [LoggingKeys.app: "\(entry.app)", LoggingKeys.provider: "\(provider)", LoggingKeys.reason: "\(failure.reason)"])
        }
        let now = context.clock()
        let policy = context.policy
        let (outcome, released) = core.withLock { core -> (DeliveryQueue.FailureOutcome, [UInt64]) in
            var random = SystemRandomNumberGenerator()
            let outcome = core.queue.failed(
                key, now: now, retryAfter: failure.retryAfter, quotaExceeded: false, policy: policy, random: &random)
            if failure.projectQuota, case .scheduled(let at) = outcome {
                core.queue.pause(scope: AppProfile.admissionScope(of: key, profile: profile), until: at)
            }
            if case .scheduled = outcome {
                core.writes.markChanged(key)
            } else if core.stored.contains(key) {
                core.writes.markChanged(key)
            }
            core.settle(totals)
            return (outcome, core.queue.takeReleasedHolds())
        }
        context.tickets.release(released)
        switch outcome {
        case .scheduled:
            context.metrics.retryScheduled(reason: failure.reason)
        case .discarded(let entries):
            context.metrics.retryOutcome("discarded", count: entries.count)
            context.logger.warning(
                "notifications discarded after 2 hours of retries; the subscription stays",
                metadata: [LoggingKeys.app: "\(entry.app)", LoggingKeys.sp: "\(entry.path)", LoggingKeys.count: "\(entries.count)"])
            context.tickets.release(entries.flatMap(\.holds))
            if entries.contains(where: \.isRevoke) { context.store.activePartition(ofApp: key.app)?.finalizeRevocation(key) }
        case .superseded:
            break
        }
        setGauges()
        wake.signal()
    }

    /// The provider says the token is dead: the subscription is deleted and its line dropped.
    private func tokenDead(_ key: RetryKey, answer: ProviderAnswer) {
        let dropped = core.withLock { core -> [PendingNotification] in
            var dropped = core.queue.completed(key).map { [$0] } ?? []
            dropped += core.queue.removeAll(forSubscription: key)
            if core.stored.contains(key) { core.writes.markChanged(key) }
            core.settle(totals)
            return dropped
        }
        context.tickets.release(dropped.flatMap(\.holds))
        context.metrics.revoked(reason: "token_dead")
        context.logger.info(
            "subscription deleted: the provider says the push token is dead",
            metadata: [LoggingKeys.app: "\(key.app)", LoggingKeys.sp: "\(key.path)", LoggingKeys.reason: "\(answer.code)", LoggingKeys.pendingDropped: "\(dropped.count - 1)"])
        context.store.activePartition(ofApp: key.app)?.deleteDeadToken(key, answer: answer)
        setGauges()
        wake.signal()
    }

    /// The gauges of all lanes: their sums, from the shared totals (no lane's lock).
    func setGauges() {
        context.metrics.retryBacklog.set(Double(totals.queuedCount))
        context.metrics.retryInFlight.set(Double(totals.inFlightCount))
    }

    // MARK: Storing lines

    /// Writes the record of every line of this lane that changed (and whose failed write's backoff is over at
    /// `now`): its current entries, or a tombstone once it is empty. A failed write is written again after a backoff
    /// (0.5 s doubling to 30 s, jittered, one chain per line: ``RetryLineWrites``), not at the next turn.
    private func write(_ batch: [LineWrite]) {
        guard !batch.isEmpty else { return }
        let store = context.store
        var byPartition: [Int32: [LineWrite]] = [:]
        for item in batch { byPartition[store.partitionIndex(ofApp: item.key.app), default: []].append(item) }
        for (index, items) in byPartition {
            guard let partition = store.partition(index), partition.role.isActive else { continue }
            for item in items {
                let (key, entries, holds) = (item.key, item.entries, item.holds)
                partition.checkpoint([.retry(RetryRecord(key: key, entries: entries))]) { [self] stored in
                    if stored {
                        core.withLock { core in
                            if entries.isEmpty { core.stored.remove(key) } else { core.stored.insert(key) }
                            core.writes.stored(key)
                        }
                        context.tickets.release(holds)
                    } else {
                        let failedAt = context.clock()
                        let retryAt = core.withLock { core -> Double in
                            core.unreleased[key, default: []] += holds
                            var random = SystemRandomNumberGenerator()
                            return core.writes.failed(key, now: failedAt, random: &random)
                        }
                        context.logger.error(
                            "pending retries not stored yet; retrying",
                            metadata: [LoggingKeys.app: "\(key.app)", LoggingKeys.retrySeconds: "\(max(0, retryAt - failedAt))"])
                        wake.signal()
                    }
                }
            }
        }
    }
}
