import GatewayCore
import Foundation
import GatewayLogging
import Logging
import Providers
import PushCore
import ServiceLifecycle
import Synchronization

/// The one delivery path (SPEC §8): every notification, retry and revoke of this replica's subscriptions goes
/// through the ``DeliveryQueue`` of its subscription's lane (``DeliveryLane``), so each subscription's messages
/// leave in the order they were decided, its retries keep their place, and its revoke is its last message.
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
///   the whole project, every app's notifications through it; for 2 hours, then the line is discarded and counted). A dead token deletes the
///   subscription and drops its line (nothing can reach it).
/// - Durability: a line whose head has failed is written to the state topic (a `retry` record of the whole
///   line, in the app's partition) and rewritten as it changes; what waits for its notifications (the change
///   event's offset) is released once it is stored. A replica that takes the partition over adopts the lines.
/// - Revocations: a revoke is queued like any notification; once it is delivered (or discarded), the
///   subscription's tombstone is written (``PartitionState/finalizeRevocation(_:)``).
/// - Lanes (`delivery.lanes`, one per core by default): the queue is split in ``DeliveryLane``s, each with its own
///   lock and send loop, so the sends of different projects do not take one lock. A subscription's line, and every
///   notification counted in one admission scope (its provider project for FCM and HMS, its app for webhooks and
///   the console sink: ``AppProfile/admissionScope(for:)``), is always in the same lane, chosen by a stable hash of
///   that scope: per-subscription order and project-wide limits (in flight, pace) are kept by one queue, exactly.
///   The replica-wide `maxInFlight` is one atomic count shared by the lanes (``DeliveryTotals``); a project quota's
///   pause is of its admission scope (the project), so it is set in the one lane that holds that project's lines.
///
/// Each lane's loop sleeps until its next due notification or its next enqueue; it never polls.
final class DeliveryService: Service, DeliveryInput, Sendable {
    private let lanes: [DeliveryLane]
    private let context: DeliveryContext

    /// `lanes`: the number of lanes (at least 1).
    init(
        profiles: AppProfiles, store: StateStore, tickets: EventTickets, payloads: PayloadBuilder, metrics: GatewayMetrics,
        board: AppStatusBoard? = nil, logger: Logger, maxInFlight: Int = 2000, policy: RetryPolicy = .standard,
        lanes laneCount: Int = ProcessInfo.processInfo.activeProcessorCount,
        clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        let signals = (0..<max(1, laneCount)).map { _ in WakeSignal() }
        context = DeliveryContext(
            profiles: profiles, store: store, tickets: tickets, payloads: payloads, metrics: metrics,
            latencies: GatewayLatencyRecorders(metrics: metrics), board: board, logger: logger, policy: policy, clock: clock,
            totals: DeliveryTotals(maxInFlight: maxInFlight, signals: signals))
        lanes = signals.enumerated().map { [context] index, wake in DeliveryLane(index: index, wake: wake, context: context) }
    }

    var laneCount: Int { lanes.count }

    // MARK: Lanes

    /// The lane of an admission scope (a provider project, an app): FNV-1a of its bytes, the same for the life of
    /// the process (Swift's `Hasher` is seeded per process, which would do too; this one is also the same in tests).
    static func laneIndex(scope: String, lanes: Int) -> Int {
        guard lanes > 1 else { return 0 }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in scope.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return Int(hash % UInt64(lanes))
    }

    /// Chooses the lanes of a batch's keys, reading each app's profile once per run of the same app; none for the
    /// app of a profile given (``DeliveryInput/enqueue(_:fetchedAt:profile:)``: the event path's).
    private struct Router {
        let profiles: AppProfiles
        let lanes: Int
        private var app: String?
        private var profile: AppProfile?

        init(profiles: AppProfiles, lanes: Int, given: AppProfile? = nil) {
            self.profiles = profiles
            self.lanes = lanes
            (app, profile) = (given?.name, given)
        }

        /// The lane of `key`'s line: that of its admission scope (``AppProfile/admissionScope(of:profile:)``).
        mutating func lane(of key: RetryKey) -> Int {
            guard lanes > 1 else { return 0 }
            if app.map({ !$0.bytesEqual(key.app) }) ?? true {
                (app, profile) = (key.app, profiles.profile(key.app))
            }
            return DeliveryService.laneIndex(scope: AppProfile.admissionScope(of: key, profile: profile), lanes: lanes)
        }
    }

    private func router(given profile: AppProfile? = nil) -> Router {
        Router(profiles: context.profiles, lanes: lanes.count, given: profile)
    }

    /// `items` grouped by lane (of the key `key` gives), each group in the order given.
    private func byLane<Item>(_ items: [Item], profile: AppProfile? = nil, key: (Item) -> RetryKey) -> [(DeliveryLane, [Item])] {
        if lanes.count == 1 { return items.isEmpty ? [] : [(lanes[0], items)] }
        var router = router(given: profile)
        var groups = [[Item]](repeating: [], count: lanes.count)
        for item in items { groups[router.lane(of: key(item))].append(item) }
        return zip(lanes, groups).filter { !$0.1.isEmpty }
    }

    // MARK: DeliveryInput

    func enqueue(_ notifications: [PendingNotification], fetchedAt: UInt64, profile: AppProfile?) {
        guard !notifications.isEmpty else { return }
        let now = context.clock()
        if fetchedAt != 0 {
            let queuedAt = Uptime.now
            context.metrics.notificationsQueued(afterNanoseconds: queuedAt >= fetchedAt ? queuedAt - fetchedAt : 0)
        }
        for (lane, batch) in byLane(notifications, profile: profile, key: \.key) { lane.enqueue(batch, fetchedAt: fetchedAt, now: now) }
    }

    // MARK: Ownership changes

    /// Takes over what a previous owner left in a partition (``PartitionMachine/Handover``): its stored lines, then
    /// the revokes no stored line holds.
    func adopt(_ handover: PartitionState.Machine.Handover) {
        guard !handover.isEmpty else { return }
        let now = context.clock()
        let lines = handover.lines.filter { !$0.isEmpty }
        var revokes = byLane(handover.revokes, key: \.key).map { ($0.0.index, $0.1) }
        for (lane, lines) in byLane(lines, key: { $0[0].key }) {
            let own = revokes.firstIndex { $0.0 == lane.index }.map { revokes.remove(at: $0).1 } ?? []
            lane.adopt(lines: lines, revokes: own, now: now)
        }
        for (index, own) in revokes { lanes[index].adopt(lines: [], revokes: own, now: now) }
        context.logger.info(
            "pending deliveries taken over",
            metadata: [LoggingKeys.retries: "\(handover.lines.count)", LoggingKeys.revokes: "\(handover.revokes.count)"])
        lanes[0].setGauges()
    }

    /// Drops the lines of apps in `partitions` (given up: the new owner adopts their stored lines and consumes
    /// their events again), in every lane. A send in flight finishes, its outcome ignored.
    func release(partitions: Set<Int32>) {
        let store = context.store
        for lane in lanes { lane.release { partitions.contains(store.partitionIndex(ofApp: $0.app)) } }
        lanes[0].setGauges()
    }

    /// A record of an earlier owner rewrote `key`'s pending-retry line in the state topic: it is written again as
    /// this replica has it (its entries, or a tombstone when it has none); after a failed write of it, at the end
    /// of its backoff (``RetryLineWrites``).
    func rewrite(line key: RetryKey) {
        var router = router()
        lanes[router.lane(of: key)].rewrite(line: key)
    }

    // MARK: Service

    /// Runs every lane's loop; on graceful shutdown each lane stops, its sends in flight finish, and it stores what
    /// changed.
    func run() async throws {
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for lane in lanes {
                    group.addTask { await lane.run() }
                }
            }
        } onGracefulShutdown: {
            for lane in self.lanes { lane.stop() }
        }
    }

    // MARK: Reading

    /// The app's delivery state: notifications queued, those in lines that back off (stored retries), summed over
    /// the lanes (O(lines)), and the end of the latest pause (a project quota) of one of its admission scopes (its
    /// FCM project, its HMS app, the app itself), if any, read in each scope's lane.
    func status(app: String, now: Double) -> (queued: Int, retrying: Int, pausedUntil: Double?) {
        var (queued, retrying, paused): (Int, Int, Double?) = (0, 0, nil)
        for lane in lanes {
            let status = lane.status(app: app)
            queued += status.queued
            retrying += status.retrying
        }
        for scope in AppProfile.admissionScopes(ofApp: app, profile: context.profiles.profile(app)) {
            if let until = lanes[Self.laneIndex(scope: scope, lanes: lanes.count)].pausedUntil(scope: scope), until > now {
                paused = max(paused ?? until, until)
            }
        }
        return (queued, retrying, paused)
    }

    /// The pace of each provider project of `app` (its send rate, the notifications waiting for it), by project:
    /// read in the project's lane.
    func pacing(app: String) -> [(project: String, pace: DeliveryQueue.Pace, waiting: Int)] {
        guard let profile = context.profiles.profile(app) else { return [] }
        return [SubscriberKind.mobile, .huawei].compactMap { profile.pace(for: $0) }.map { pace in
            let (current, waiting) = lanes[Self.laneIndex(scope: pace.key, lanes: lanes.count)].pace(pace.key)
            return (pace.key, current ?? pace, waiting)
        }
    }
}
