import GatewayCore
import Foundation
import GatewayLogging
import Logging
import Providers
import PushCore
import ServiceLifecycle
import Synchronization

/// The one delivery path (SPEC §8): every notification, retry and revoke of this replica's subscriptions goes
/// through one ``DeliveryQueue``, so each subscription's messages leave in the order they were decided, its
/// retries keep their place, and its revoke is its last message.
///
/// - Sending: at most one notification in flight per subscription, at most `maxInFlight` overall; the queue's
///   admissions (``AppProfile/admissions(for:)``) add at most `webhook.maxInFlightPerHost` per app and webhook
///   destination host, at most `fcm.maxInFlightPerProject` requests in flight per FCM project / HMS app, and each
///   such project at its send quota (`fcm.maxSendsPerMinute`, `hms.maxSendsPerSecond`), granted all together;
///   a notification waiting for them takes no sending place. Payloads are built at send time (v1 ones once per
///   node, when queued).
/// - Failures: a recoverable error (or one that is our fault: bad credentials or request, which never revoke
///   anyone) keeps the notification at the head of its subscription's line and retries it with backoff
///   (``RetryPolicy``: from 1 s, honouring `Retry-After`, at least 60 s after `QUOTA_EXCEEDED`, which pauses
///   the whole app, for 2 hours, then the line is discarded and counted). A dead token deletes the
///   subscription and drops its line (nothing can reach it).
/// - Durability: a line whose head has failed is written to the state topic (a `retry` record of the whole
///   line, in the app's partition) and rewritten as it changes; what waits for its notifications (the change
///   event's offset) is released once it is stored. A replica that takes the partition over adopts the lines.
/// - Revocations: a revoke is queued like any notification; once it is delivered (or discarded), the
///   subscription's tombstone is written (``PartitionState/finalizeRevocation(_:)``).
///
/// The retry loop sleeps until the next due notification or the next enqueue; it never polls.
final class DeliveryService: Service, DeliveryInput, Sendable {
    private struct Core {
        var queue: DeliveryQueue
        /// Lines that have a `retry` record in the state topic (an empty line then needs a tombstone).
        var stored: Set<RetryKey> = []
        /// Lines whose record must be (re)written, now or after the backoff of a failed write.
        var writes = RetryLineWrites()
        /// Holds taken from lines whose write failed: released by the next successful write of the line.
        var unreleased: [RetryKey: [UInt64]] = [:]
        var stopping = false
    }

    private let core: Mutex<Core>
    private let wake = WakeSignal()
    private let profiles: AppProfiles
    private let store: StateStore
    private let tickets: EventTickets
    private let payloads: PayloadBuilder
    private let metrics: GatewayMetrics
    private let board: AppStatusBoard?
    private let logger: Logger
    private let policy: RetryPolicy
    private let maxInFlight: Int
    private let clock: @Sendable () -> Double

    init(
        profiles: AppProfiles, store: StateStore, tickets: EventTickets, payloads: PayloadBuilder, metrics: GatewayMetrics,
        board: AppStatusBoard? = nil, logger: Logger, maxInFlight: Int = 2000, policy: RetryPolicy = .standard,
        clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.profiles = profiles
        self.store = store
        self.tickets = tickets
        self.payloads = payloads
        self.metrics = metrics
        self.board = board
        self.logger = logger
        self.maxInFlight = maxInFlight
        self.policy = policy
        self.clock = clock
        // A webhook waits for its destination host's place in the queue, not in a sending place; a notification
        // through FCM or HMS waits there for its project's send rate and a place of its requests in flight.
        self.core = Mutex(Core(queue: DeliveryQueue(admissions: { entry in
            profiles.profile(entry.app)?.admissions(for: entry.subscriber) ?? []
        })))
    }

    // MARK: DeliveryInput

    func enqueue(_ notifications: [PendingNotification], fetchedAt: UInt64) {
        guard !notifications.isEmpty else { return }
        let now = clock()
        if fetchedAt != 0 {
            let queuedAt = Uptime.now
            metrics.notificationsQueued(afterNanoseconds: queuedAt >= fetchedAt ? queuedAt - fetchedAt : 0)
        }
        let released = core.withLock { core -> [UInt64] in
            for var notification in notifications {
                notification.fetchedAt = fetchedAt
                let key = notification.key
                let stored = core.queue.isBackingOff(key) || core.stored.contains(key)
                    || (core.queue.pausedUntil(scope: notification.scope) ?? 0) > now
                core.queue.enqueue(notification)
                // Behind a backing-off (or paused) line: stored with it, so that the event need not wait.
                if stored { core.writes.markChanged(key) }
            }
            return core.queue.takeReleasedHolds()
        }
        tickets.release(released)
        wake.signal()
    }

    // MARK: Ownership changes

    /// Takes over what a previous owner left in a partition (``PartitionMachine/Handover``): its stored lines, then
    /// the revokes no stored line holds.
    func adopt(_ handover: PartitionState.Machine.Handover) {
        guard !handover.isEmpty else { return }
        let now = clock()
        core.withLock { core in
            for line in handover.lines {
                for entry in line { core.queue.enqueue(entry) }
                if let key = line.first?.key { core.stored.insert(key) }
            }
            for var revoke in handover.revokes {
                // Its first attempt is now, on this service's clock.
                (revoke.firstFailureAt, revoke.notBefore) = (now, now)
                core.queue.enqueue(revoke)
            }
        }
        logger.info(
            "pending deliveries taken over",
            metadata: [LoggingKeys.retries: "\(handover.lines.count)", LoggingKeys.revokes: "\(handover.revokes.count)"])
        updateGauges()
        wake.signal()
    }

    /// Drops the lines of apps in `partitions` (given up: the new owner adopts their stored lines and consumes
    /// their events again). A send in flight finishes, its outcome ignored.
    func release(partitions: Set<Int32>) {
        core.withLock { core in
            let inPartitions: (RetryKey) -> Bool = { partitions.contains(self.store.partitionIndex(ofApp: $0.app)) }
            core.queue.removeAll(where: inPartitions)
            _ = core.queue.takeReleasedHolds()
            core.stored = core.stored.filter { !inPartitions($0) }
            core.writes.removeAll(where: inPartitions)
            core.unreleased = core.unreleased.filter { !inPartitions($0.key) }
        }
        updateGauges()
    }

    /// A record of an earlier owner rewrote `key`'s pending-retry line in the state topic: it is written again as
    /// this replica has it (its entries, or a tombstone when it has none); after a failed write of it, at the end
    /// of its backoff (``RetryLineWrites``).
    func rewrite(line key: RetryKey) {
        core.withLock { $0.writes.markChanged(key) }
        wake.signal()
    }

    // MARK: Service

    func run() async throws {
        await withGracefulShutdownHandler {
            await wake.runDueLoop(
                clock: clock,
                turn: { now in
                    let (due, stopping, next, paced, waiting) = core.withLock {
                        core -> ([PendingNotification], Bool, Double?, [String: Int], [String: Int]) in
                        let free = maxInFlight - core.queue.inFlightCount
                        let due = !core.stopping && free > 0 ? core.queue.due(now: now, limit: free) : []
                        // Also woken at the end of a failed line write's backoff.
                        let next = [core.queue.nextWakeUp, core.writes.nextWakeUp].compactMap { $0 }.min()
                        return (due, core.stopping, next, core.queue.takePacedSends(), core.queue.takeWaitingForPaceChanges())
                    }
                    for (project, count) in paced { metrics.sendsPaced(project: project, count: count) }
                    for (project, count) in waiting { metrics.waitingForPace(project: project, count: count) }
                    return (due, stopping, next)
                }, afterTurn: { flush(now: clock()) }, send: { entry in await self.deliver(entry) })
            // Sends in flight have finished: store what changed (backoffs cut short: a last attempt).
            flush(now: .infinity)
        } onGracefulShutdown: {
            self.core.withLock { $0.stopping = true }
            self.wake.signal()
        }
    }

    // MARK: Sending

    private func deliver(_ entry: PendingNotification) async {
        let key = entry.key
        guard let profile = profiles.profile(entry.app), let sender = profile.sender(for: entry.subscriber.kind) else {
            // Settings or provider gone: our side. Retried later (within the 2-hour limit), nobody revoked.
            return failed(key, entry, DeliveryFailure(reason: "no_provider", classification: .ourFault), provider: "none")
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
                    return failed(key, entry, DeliveryFailure(reason: "ownership_unconfirmed", classification: .retryable), provider: "none")
                }
                // Given up (superseded, or revoked): the new owner consumes the events again and delivers. Nothing
                // is released: the event's offset must not move here.
                metrics.retryOutcome("dropped_not_owner")
                return core.withLock { core in
                    _ = core.queue.completed(key)
                    _ = core.queue.takeReleasedHolds()
                }
            }
        }
        guard
            let payload = entry.payload
                ?? payloads.payload(
                    profile: profile, path: entry.path, subscriber: entry.subscriber, format: entry.format,
                    encryption: entry.encryption, content: entry.content)
        else {
            return completed(key)  // cannot be built (over 4093 bytes even without data): counted, dropped
        }
        guard let options = DeliveryOptions.of(entry, now: clock()) else {
            // A user notification whose TTL ran out while it was retried: the publisher no longer wants it sent.
            metrics.retryOutcome("expired")
            return completed(key)
        }
        let messageID = entry.subscriber.kind == .webhook ? WebhookSender.messageID(origin: entry.origin, body: payload) : ""
        let outcome = await RequestSubmission.$current.withValue(submissionMark(entry, provider: sender.provider)) {
            await sender.send(token: entry.subscriber.token, payload: payload, messageID: messageID, options: options)
        }
        switch outcome {
        case .sent:
            metrics.notificationSent(provider: sender.provider)
            board?.sent(app: entry.app, project: sender.project)
            if entry.attempt > 0 { metrics.retryOutcome("delivered") }
            if let time = entry.eventTime, entry.attempt == 0 { metrics.latency.record(max(0, clock() - time)) }
            completed(key)
        case .failed(let failure):
            metrics.notificationFailed(provider: sender.provider, failure: failure)
            board?.failed(app: entry.app, project: sender.project, failure: failure)
            if failure.classification == .tokenDead {
                tokenDead(
                    key,
                    answer: ProviderAnswer(provider: sender.provider, httpStatus: failure.httpStatus, code: failure.reason, message: failure.message))
            } else if failure.classification == .rejected {
                // The receiver refused this message: dropped (counted above), the line moves on, nobody revoked.
                logger.warning(
                    "the receiver refused a notification: dropped, the subscription stays",
                    metadata: [LoggingKeys.app: "\(entry.app)", LoggingKeys.provider: "\(sender.provider)", LoggingKeys.reason: "\(failure.reason)"])
                if entry.attempt > 0 { metrics.retryOutcome("rejected") }
                completed(key)
            } else {
                failed(key, entry, failure, provider: sender.provider)
            }
        }
    }

    /// The first attempt of a notification from a fetched record records the gateway's own latency when the sender
    /// hands its request to the HTTP client (``RequestSubmission``); a retry (or an adopted line) records nothing.
    private func submissionMark(_ entry: PendingNotification, provider: String) -> RequestSubmission.Mark? {
        guard entry.attempt == 0, entry.fetchedAt != 0 else { return nil }
        return RequestSubmission.Mark(fetchedAt: entry.fetchedAt, observer: metrics.gatewayLatency(provider: provider))
    }

    private func completed(_ key: RetryKey) {
        let (done, released, queued, inFlight) = core.withLock { core -> (PendingNotification?, [UInt64], Int, Int) in
            let done = core.queue.completed(key)
            if core.stored.contains(key) { core.writes.markChanged(key) }
            return (done, core.queue.takeReleasedHolds(), core.queue.count, core.queue.inFlightCount)
        }
        tickets.release(released + (done?.holds ?? []))
        if let done, done.isRevoke { store.activePartition(ofApp: key.app)?.finalizeRevocation(key) }
        // The counts read under the same lock (a second lock per notification showed in profiles).
        setGauges(queued: queued, inFlight: inFlight)
        wake.signal()
    }

    private func failed(_ key: RetryKey, _ entry: PendingNotification, _ failure: DeliveryFailure, provider: String) {
        if failure.classification == .ourFault {
            logger.error(
                "the provider refused our request or credentials: nobody is revoked, the notification is retried",
                metadata: [LoggingKeys.app: "\(entry.app)", LoggingKeys.provider: "\(provider)", LoggingKeys.reason: "\(failure.reason)"])
        }
        let now = clock()
        let (outcome, released) = core.withLock { core -> (DeliveryQueue.FailureOutcome, [UInt64]) in
            var random = SystemRandomNumberGenerator()
            let outcome = core.queue.failed(
                key, now: now, retryAfter: failure.retryAfter, quotaExceeded: false, policy: policy, random: &random)
            if failure.projectQuota, case .scheduled(let at) = outcome { core.queue.pause(scope: entry.scope, until: at) }
            if case .scheduled = outcome {
                core.writes.markChanged(key)
            } else if core.stored.contains(key) {
                core.writes.markChanged(key)
            }
            return (outcome, core.queue.takeReleasedHolds())
        }
        tickets.release(released)
        switch outcome {
        case .scheduled:
            metrics.retryScheduled(reason: failure.reason)
        case .discarded(let entries):
            metrics.retryOutcome("discarded", count: entries.count)
            logger.warning(
                "notifications discarded after 2 hours of retries; the subscription stays",
                metadata: [LoggingKeys.app: "\(entry.app)", LoggingKeys.sp: "\(entry.path)", LoggingKeys.count: "\(entries.count)"])
            tickets.release(entries.flatMap(\.holds))
            if entries.contains(where: \.isRevoke) { store.activePartition(ofApp: key.app)?.finalizeRevocation(key) }
        case .superseded:
            break
        }
        updateGauges()
        wake.signal()
    }

    /// The provider says the token is dead: the subscription is deleted and its line dropped.
    private func tokenDead(_ key: RetryKey, answer: ProviderAnswer) {
        let dropped = core.withLock { core -> [PendingNotification] in
            var dropped = core.queue.completed(key).map { [$0] } ?? []
            dropped += core.queue.removeAll(forSubscription: key)
            if core.stored.contains(key) { core.writes.markChanged(key) }
            return dropped
        }
        tickets.release(dropped.flatMap(\.holds))
        metrics.revoked(reason: "token_dead")
        logger.info(
            "subscription deleted: the provider says the push token is dead",
            metadata: [LoggingKeys.app: "\(key.app)", LoggingKeys.sp: "\(key.path)", LoggingKeys.reason: "\(answer.code)", LoggingKeys.pendingDropped: "\(dropped.count - 1)"])
        store.activePartition(ofApp: key.app)?.deleteDeadToken(key, answer: answer)
        updateGauges()
        wake.signal()
    }

    // MARK: Storing lines

    /// Writes the record of every line that changed (and whose failed write's backoff is over at `now`): its
    /// current entries, or a tombstone once it is empty. A failed write is written again after a backoff (0.5 s
    /// doubling to 30 s, jittered, one chain per line: ``RetryLineWrites``), not at the next turn.
    private func flush(now: Double) {
        let batch = core.withLock { core -> [(RetryKey, [PendingNotification], [UInt64])] in
            core.writes.takeReady(now: now).map { key in
                let holds = core.queue.takeHolds(forSubscription: key) + (core.unreleased.removeValue(forKey: key) ?? [])
                return (key, core.queue.pending(for: key), holds)
            }
        }
        guard !batch.isEmpty else { return }
        var byPartition: [Int32: [(RetryKey, [PendingNotification], [UInt64])]] = [:]
        for item in batch { byPartition[store.partitionIndex(ofApp: item.0.app), default: []].append(item) }
        for (index, items) in byPartition {
            guard let partition = store.partition(index), partition.role.isActive else { continue }
            for (key, entries, holds) in items {
                partition.checkpoint([.retry(RetryRecord(key: key, entries: entries))]) { [self] stored in
                    if stored {
                        core.withLock { core in
                            if entries.isEmpty { core.stored.remove(key) } else { core.stored.insert(key) }
                            core.writes.stored(key)
                        }
                        tickets.release(holds)
                    } else {
                        let failedAt = clock()
                        let retryAt = core.withLock { core -> Double in
                            core.unreleased[key, default: []] += holds
                            var random = SystemRandomNumberGenerator()
                            return core.writes.failed(key, now: failedAt, random: &random)
                        }
                        logger.error(
                            "pending retries not stored yet; retrying",
                            metadata: [LoggingKeys.app: "\(key.app)", LoggingKeys.retrySeconds: "\(max(0, retryAt - failedAt))"])
                        wake.signal()
                    }
                }
            }
        }
    }

    /// The app's delivery state: notifications queued, those in lines that back off (stored retries), and
    /// the end of its pause (a project quota), if any. O(lines).
    func status(app: String, now: Double) -> (queued: Int, retrying: Int, pausedUntil: Double?) {
        core.withLock { core in
            var queued = 0
            var retrying = 0
            for key in core.queue.keys where key.app.bytesEqual(app) {
                let count = core.queue.pending(for: key).count
                queued += count
                if core.queue.isBackingOff(key) { retrying += count }
            }
            let paused = core.queue.pausedUntil(scope: app).flatMap { $0 > now ? $0 : nil }
            return (queued, retrying, paused)
        }
    }

    /// The pace of each provider project of `app` (its send rate, the notifications waiting for it), by project.
    func pacing(app: String) -> [(project: String, pace: DeliveryQueue.Pace, waiting: Int)] {
        guard let profile = profiles.profile(app) else { return [] }
        let paces = [SubscriberKind.mobile, .huawei].compactMap { profile.pace(for: $0) }
        return core.withLock { core in
            paces.map { pace in (pace.key, core.queue.pace(pace.key) ?? pace, core.queue.waitingCount(pace: pace.key)) }
        }
    }

    private func updateGauges() {
        let (queued, inFlight) = core.withLock { ($0.queue.count, $0.queue.inFlightCount) }
        setGauges(queued: queued, inFlight: inFlight)
    }

    private func setGauges(queued: Int, inFlight: Int) {
        metrics.retryBacklog.set(Double(queued))
        metrics.retryInFlight.set(Double(inFlight))
    }
}
