import Foundation
import Logging
import PushCore
import ServiceLifecycle
import Synchronization

/// Receives pending retries read from the state topic (``StateLog``).
protocol RetrySink: Sendable {
    func followed(_ record: RetryRecord)
}

/// Durable retries of failed notifications (SPEC §8).
///
/// A notification whose provider answered with a recoverable error (or with an error that is our fault:
/// bad credentials, bad request, which must never revoke anyone) is put in the ``RetryQueue`` of its
/// subscription and written to the state topic (a `retry` record holding the subscription's whole line of
/// pending notifications, co-partitioned with the app's events) before the event's offset may move. It is
/// retried with exponential backoff from 1 s (``RetryPolicy``), honouring `Retry-After`, for 2 hours from the
/// first failure, then discarded and counted; the subscription stays. `QUOTA_EXCEEDED` on the project pauses
/// the whole app (one provider project per app) for at least a minute.
///
/// While a subscription has pending notifications, new ones queue behind them (order per subscription is kept)
/// and `noData`/`value` ones are coalesced to the latest. A dead token revokes the subscription: it is deleted
/// from the state topic and its pending notifications are dropped (a revoke message cannot reach a dead token).
///
/// Only the replica that owns an app's partition retries its notifications. Every replica follows the retry
/// records of the apps it does not own, so that a takeover resumes them.
final class RetryService: Service, RetrySink, Sendable {
    private let queue = Mutex(RetryQueue())
    /// Pending retries of apps owned by another replica, as last written by it.
    private let followed = Mutex<[RetryKey: [PendingNotification]]>([:])
    private let store: SubscriptionStore
    private let stateLog: StateLog
    private let dispatcher: Dispatcher
    private let ownership: Ownership
    private let metrics: GatewayMetrics
    private let logger: Logger
    private let policy: RetryPolicy
    private let clock: @Sendable () -> Double
    private let stopping = Atomic<Bool>(false)

    init(
        store: SubscriptionStore, stateLog: StateLog, dispatcher: Dispatcher, ownership: Ownership, metrics: GatewayMetrics,
        logger: Logger, policy: RetryPolicy = .standard, clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.store = store
        self.stateLog = stateLog
        self.dispatcher = dispatcher
        self.ownership = ownership
        self.metrics = metrics
        self.logger = logger
        self.policy = policy
        self.clock = clock
    }

    // MARK: RetrySink

    func followed(_ record: RetryRecord) {
        followed.withLock { followed in followed[record.key] = record.entries.isEmpty ? nil : record.entries }
    }

    // MARK: From the dispatcher (inside the subscriber's ordering ticket)

    /// True when `delivery` was queued (durably) behind pending notifications of its subscription or because
    /// its app is paused; it must not be sent now.
    func holdsBack(_ delivery: Delivery) async -> (held: Bool, durable: Bool) {
        let now = clock()
        let queued = queue.withLock { queue -> Bool in
            let paused = (queue.pausedUntil(scope: delivery.app) ?? 0) > now
            guard queue.hasPending(for: delivery.retryKey) || paused else { return false }
            _ = queue.enqueue(pending(delivery, firstFailureAt: now, attempt: 0, notBefore: now))
            return true
        }
        guard queued else { return (false, true) }
        let durable = await persist(delivery.retryKey)
        updateBacklog()
        return (true, durable)
    }

    /// Handles a failed send: schedules a retry, or revokes the subscription of a dead token. False when the
    /// outcome could not be stored (shutdown): the event must then be consumed again after a restart.
    func handle(_ failure: DeliveryFailure, of delivery: Delivery) async -> Bool {
        let now = clock()
        switch failure.kind {
        case .tokenDead:
            return await revokeDeadToken(delivery.retryKey, reason: failure.reason)
        case .ourFault:
            logger.error(
                "the provider refused our request or credentials: nobody is revoked, the notification is retried",
                metadata: ["app": "\(delivery.app)", "reason": "\(failure.reason)"])
        case .retryable:
            break
        }
        let scheduled = queue.withLock { queue -> Double? in
            // The provider's minimum wait (Retry-After, 60 s after QUOTA_EXCEEDED) is in `retryAfter`.
            var random = SystemRandomNumberGenerator()
            guard
                let next = policy.nextAttempt(
                    firstFailureAt: now, now: now, attempt: 1, retryAfter: failure.retryAfter, quotaExceeded: false,
                    random: &random)
            else { return nil }
            if failure.projectQuota { queue.pause(scope: delivery.app, until: next) }
            _ = queue.enqueue(pending(delivery, firstFailureAt: now, attempt: 1, notBefore: next))
            return next
        }
        guard scheduled != nil else { return true }
        metrics.retryScheduled(reason: failure.reason)
        let durable = await persist(delivery.retryKey)
        updateBacklog()
        return durable
    }

    private func pending(_ delivery: Delivery, firstFailureAt: Double, attempt: Int, notBefore: Double) -> PendingNotification {
        PendingNotification(
            app: delivery.app, path: delivery.path, subscriber: delivery.subscriber, format: delivery.format,
            content: delivery.content, scope: delivery.app, origin: delivery.origin, firstFailureAt: firstFailureAt,
            attempt: attempt, notBefore: notBefore)
    }

    // MARK: The retry loop

    func run() async throws {
        await stateLog.waitUntilLoaded()
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                while !Task.isShuttingDownGracefully && !stopping.load(ordering: .relaxed) {
                    adoptOwnedApps()
                    let now = clock()
                    let due = queue.withLock { $0.due(now: now, limit: 500) }
                    for entry in due {
                        group.addTask { await self.retry(entry) }
                    }
                    try? await Task.sleep(for: .milliseconds(due.isEmpty ? 50 : 5))
                }
            }
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .relaxed)
        }
    }

    /// Moves the followed retries of apps this replica now owns into the queue, and the queued ones of apps it
    /// no longer owns back to the followed set.
    private func adoptOwnedApps() {
        let adopted = followed.withLock { followed -> [RetryKey: [PendingNotification]] in
            let owned = followed.filter { ownership.owns(app: $0.key.app) }
            for key in owned.keys { followed[key] = nil }
            return owned
        }
        if !adopted.isEmpty {
            queue.withLock { queue in
                for (_, entries) in adopted {
                    for entry in entries { _ = queue.enqueue(entry) }
                }
            }
            logger.info("pending retries taken over", metadata: ["subscriptions": "\(adopted.count)"])
            updateBacklog()
        }
    }

    private func retry(_ entry: PendingNotification) async {
        let key = entry.key
        guard ownership.owns(app: entry.app), let profile = store.app(entry.app)?.profile,
            let sender = profile.sender(for: entry.subscriber.kind),
            let payload = dispatcher.payload(
                profile: profile, path: entry.path, subscriber: entry.subscriber, format: entry.format, content: entry.content)
        else {
            let owned = ownership.owns(app: entry.app)
            let entries = queue.withLock { queue -> [PendingNotification] in
                let entries = queue.pending(for: key)
                if owned {
                    // Settings or provider gone, or the payload cannot be built: try again later (2-hour limit).
                    var random = SystemRandomNumberGenerator()
                    _ = queue.failed(key, now: clock(), policy: policy, random: &random)
                } else {
                    // Another replica owns the app now: hand the line over to the followed set.
                    _ = queue.removeAll(forSubscription: key)
                    var random = SystemRandomNumberGenerator()
                    _ = queue.failed(key, now: clock(), policy: policy, random: &random)
                }
                return entries
            }
            if !owned { followed.withLock { $0[key] = entries } } else { _ = await persist(key) }
            return
        }
        // Unsubscribed (or revoked) meanwhile: its pending data notifications are dropped; a revoke still goes.
        if !entry.isRevoke,
            store.app(entry.app)?.withIndex({ $0.subscription(path: entry.path, subscriber: entry.subscriber) }) == nil
        {
            queue.withLock { $0.completed(key) }
            metrics.retryOutcome("dropped_unsubscribed")
            _ = await persist(key)
            updateBacklog()
            return
        }
        let outcome = await sender.send(token: entry.subscriber.token, payload: payload)
        let now = clock()
        switch outcome {
        case .sent, .queued:
            metrics.notificationSent(provider: sender.provider)
            metrics.retryOutcome("delivered")
            queue.withLock { $0.completed(key) }
        case .failed(let failure):
            metrics.notificationFailed(provider: sender.provider, failure: failure)
            if failure.kind == .tokenDead {
                queue.withLock { $0.completed(key) }
                _ = await revokeDeadToken(key, reason: failure.reason)
                return
            }
            let result = queue.withLock { queue -> RetryQueue.FailureOutcome in
                var random = SystemRandomNumberGenerator()
                let result = queue.failed(
                    key, now: now, retryAfter: failure.retryAfter, quotaExceeded: false, policy: policy, random: &random)
                if failure.projectQuota, case .scheduled(let at) = result { queue.pause(scope: entry.app, until: at) }
                return result
            }
            switch result {
            case .scheduled:
                metrics.retryScheduled(reason: failure.reason)
            case .discarded(let count):
                metrics.retryOutcome("discarded", count: count)
                logger.warning(
                    "notifications discarded after 2 hours of retries; the subscription stays",
                    metadata: ["app": "\(entry.app)", "sp": "\(entry.path)", "count": "\(count)"])
            case .superseded:
                break
            }
        }
        _ = await persist(key)
        updateBacklog()
    }

    /// The provider says the token is dead: the subscription is deleted and its pending notifications dropped.
    private func revokeDeadToken(_ key: RetryKey, reason: String) async -> Bool {
        let dropped = queue.withLock { $0.removeAll(forSubscription: key) }
        metrics.revoked(reason: "token_dead")
        logger.info(
            "subscription revoked: the provider says the push token is dead",
            metadata: ["app": "\(key.app)", "sp": "\(key.path)", "reason": "\(reason)", "pending.dropped": "\(dropped)"])
        var records: [StateRecord] = [.subscription(.deletion(app: key.app, path: key.path, subscriber: key.subscriber))]
        if dropped > 0 { records.append(.retry(RetryRecord(key: key, entries: []))) }
        let durable = await write(records)
        updateBacklog()
        return durable
    }

    // MARK: Persistence

    private struct Flush {
        var keys: Set<RetryKey> = []
        var waiters: [CheckedContinuation<Bool, Never>] = []
        var running = false
    }
    private let flush = Mutex(Flush())

    /// Returns once the subscription's current line of pending notifications is in the state topic. Writes are
    /// batched by one flusher, each writing the latest line of every key that changed (so they stay in order).
    private func persist(_ key: RetryKey) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let start = flush.withLock { flush -> Bool in
                flush.keys.insert(key)
                flush.waiters.append(continuation)
                if flush.running { return false }
                flush.running = true
                return true
            }
            if start { Task { await self.flushLoop() } }
        }
    }

    private func flushLoop() async {
        while true {
            let batch = flush.withLock { flush -> (Set<RetryKey>, [CheckedContinuation<Bool, Never>])? in
                if flush.keys.isEmpty {
                    flush.running = false
                    return nil
                }
                defer {
                    flush.keys = []
                    flush.waiters = []
                }
                return (flush.keys, flush.waiters)
            }
            guard let (keys, waiters) = batch else { return }
            let records = queue.withLock { queue in
                keys.map { StateRecord.retry(RetryRecord(key: $0, entries: queue.pending(for: $0))) }
            }
            let durable = await write(records)
            for waiter in waiters { waiter.resume(returning: durable) }
        }
    }

    /// Writes until the state topic has the records (the offsets of the events wait meanwhile). False when
    /// shutdown came first.
    private func write(_ records: [StateRecord]) async -> Bool {
        var delay = Duration.milliseconds(200)
        while true {
            do {
                try await stateLog.write(records)
                return true
            } catch {
                logger.error("pending retries not yet stored; retrying", metadata: ["error": "\(error)"])
                if Task.isShuttingDownGracefully || stopping.load(ordering: .relaxed) { return false }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(10))
            }
        }
    }

    private func updateBacklog() {
        let (queued, inFlight) = queue.withLock { ($0.count, $0.inFlightCount) }
        metrics.retryBacklog.set(Double(queued))
        metrics.retryInFlight.set(Double(inFlight))
    }
}
