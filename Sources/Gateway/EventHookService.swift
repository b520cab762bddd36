import Foundation
import GatewayCore
import GatewayLogging
import Logging
import Providers
import PushCore
import ServiceLifecycle
import Synchronization

/// Sends each app's event hook (docs/DELIVERY.md, "The app's event hook"): what happened to its subscriptions
/// (revoked, expired, dead token), as signed Standard Webhooks POSTs to the app's `eventHook.url`.
///
/// - Input: ``record(_:)``, called by a partition's driver, as it issues the partition's ordered actions, with each ended
///   subscription once its tombstone is stored, in that order (``PartitionAction/subscriptionEnded(_:)``). It only
///   builds the body and queues it (its own lock, a metric): notification delivery and the partition never wait
///   for the hook.
/// - Delivery: ``EventHookQueue``: ordered per app, one request in flight per app, retried on 429/5xx/timeouts/
///   connection errors with backoff for 2 hours, dropped on another answer; the app's webhook client (signing
///   secrets, address checks at each delivery, timeout, CA file).
/// - In memory only: events still queued when the process stops (or crashes) are lost; a graceful stop lets the
///   requests in flight finish and counts the rest (`pushgateway_event_hook_dropped_total{reason="shutdown"}`).
final class EventHookService: Service, Sendable {
    private struct Core {
        var queue = EventHookQueue()
        var stopping = false
    }

    private let core = Mutex(Core())
    private let wake = WakeSignal()
    private let profiles: AppProfiles
    private let metrics: GatewayMetrics
    private let logger: Logger
    private let policy: RetryPolicy
    private let clock: @Sendable () -> Double

    init(
        profiles: AppProfiles, metrics: GatewayMetrics, logger: Logger, policy: RetryPolicy = .standard,
        clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.profiles = profiles
        self.metrics = metrics
        self.logger = logger
        self.policy = policy
        self.clock = clock
    }

    /// Queues the event of `ended` for its app's hook (nothing when the app has none). Never waits: it is called
    /// under a partition's lock.
    func record(_ ended: EndedSubscription) {
        guard let hook = profiles.profile(ended.app)?.eventHook else { return }
        let event = EventHookEvent(ended, at: clock())
        let (refusal, backlog) = core.withLock { core -> (String?, Int) in
            if core.stopping { return ("shutdown", core.queue.count) }
            let queued = core.queue.enqueue(app: ended.app, event: event, limit: hook.maxQueuedEvents)
            return (queued ? nil : "queue_full", core.queue.count)
        }
        metrics.eventHookQueued.set(Double(backlog))
        if let refusal { return metrics.eventHookDropped(reason: refusal) }
        metrics.eventHookEvent(type: event.type)
        wake.signal()
    }

    /// Events queued for `app` (the per-app status).
    func queued(app: String) -> Int { core.withLock { $0.queue.count(app: app) } }

    func run() async throws {
        await withGracefulShutdownHandler {
            await wake.runDueLoop(
                clock: clock,
                turn: { now in
                    core.withLock { core in (core.stopping ? [] : core.queue.due(now: now), core.stopping, core.queue.nextWakeUp) }
                }, send: { item in await self.send(app: item.app, entry: item.entry) })
        } onGracefulShutdown: {
            self.core.withLock { $0.stopping = true }
            self.wake.signal()
        }
        // The requests in flight have finished; what is left is lost with the process.
        let left = core.withLock { $0.queue.removeAll() }
        metrics.eventHookQueued.set(0.0)
        if left > 0 {
            metrics.eventHookDropped(reason: "shutdown", count: left)
            logger.warning("event hook: events still queued at shutdown are dropped", metadata: [LoggingKeys.count: "\(left)"])
        }
    }

    private func send(app: String, entry: EventHookQueue.Entry) async {
        guard let hook = profiles.profile(app)?.eventHook else {
            // The app's hook (or the app) is gone from the settings: its events have nowhere to go.
            let dropped = core.withLock { $0.queue.removeAll(app: app) }
            metrics.eventHookDropped(reason: "no_hook", count: dropped)
            return
        }
        let outcome = await hook.client.send(destination: hook.url, messageID: entry.event.id, body: entry.event.body)
        let now = clock()
        let (resolution, backlog) = core.withLock { core -> (EventHookQueue.Resolution, Int) in
            var random = SystemRandomNumberGenerator()
            return (core.queue.finish(app: app, outcome: outcome, now: now, policy: policy, random: &random), core.queue.count)
        }
        metrics.eventHookQueued.set(Double(backlog))
        switch resolution {
        case .sent:
            metrics.eventHookSent()
        case .retry(_, let reason):
            metrics.eventHookFailed(reason: reason)
        case .rejected(let reason):
            dropped(app: app, failure: reason, as: "rejected", "event hook: the receiver refused an event; it is dropped")
        case .gaveUp(let reason):
            dropped(app: app, failure: reason, as: "expired", "event hook: an event was dropped after 2 hours of retries")
        case .gone:
            break
        }
        wake.signal()
    }

    private func dropped(app: String, failure: String, as reason: String, _ message: Logger.Message) {
        metrics.eventHookFailed(reason: failure)
        metrics.eventHookDropped(reason: reason)
        logger.warning(message, metadata: [LoggingKeys.app: "\(app)", LoggingKeys.reason: "\(failure)"])
    }
}
