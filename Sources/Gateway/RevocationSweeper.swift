import Foundation
import KafkaClient
import Logging
import PushCore
import Rules
import ServiceLifecycle
import Synchronization

/// Revokes the subscriptions that settings or time have made invalid, for each app whose change partition
/// this replica owns (SPEC §8):
///
/// - `expired`: past their expiry time;
/// - `disabled`: every subscription of an app switched off;
/// - `permission_denied`: those the app's read rules no longer allow, re-checked when the rules changed
///   (and once per app when this replica starts owning it);
/// - `too_big`: `value`/`childEvent` subscriptions whose node's data is over the app's limit, re-checked
///   when the limit changed.
///
/// It runs every `subscriptions.expirySweepSeconds`, and at once when app settings change (``poke()``).
/// Revoke first, delete second: the revoke message is sent, then the tombstone is written; a crash in between
/// sends the revoke again rather than losing it.
final class RevocationSweeper: Service, Sendable {
    private let store: SubscriptionStore
    private let stateLog: StateLog
    private let dispatcher: Dispatcher
    private let ownership: Ownership
    private let interval: Duration
    private let logger: Logger
    private let poked = Atomic<Bool>(false)
    /// Per app, the rules fingerprint and shadow limit its subscriptions were last checked against here.
    private let checked = Mutex<[String: (rules: String, limit: Int)]>([:])

    init(
        store: SubscriptionStore, stateLog: StateLog, dispatcher: Dispatcher, ownership: Ownership, interval: Duration,
        logger: Logger
    ) {
        self.store = store
        self.stateLog = stateLog
        self.dispatcher = dispatcher
        self.ownership = ownership
        self.interval = interval
        self.logger = logger
    }

    /// Asks for a sweep now (settings changed).
    func poke() { poked.store(true, ordering: .relaxed) }

    func run() async throws {
        await stateLog.waitUntilLoaded()
        var last = ContinuousClock.now
        while !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: .milliseconds(100)) }
            } catch {
                return
            }
            let due = ContinuousClock.now - last >= interval
            if due || poked.exchange(false, ordering: .relaxed) || ownershipChanged() {
                last = ContinuousClock.now
                await sweep(now: Int64(Date().timeIntervalSince1970))
            }
        }
    }

    private let lastGeneration = Atomic<UInt64>(0)

    /// True when the owned partitions changed since the last sweep (apps taken over must be checked here).
    private func ownershipChanged() -> Bool {
        let generation = ownership.generation
        return lastGeneration.exchange(generation, ordering: .relaxed) != generation
    }

    func sweep(now: Int64) async {
        for name in store.configuredAppNames {
            guard ownership.owns(app: name), let app = store.app(name), let profile = app.profile else {
                checked.withLock { $0[name] = nil }
                continue
            }
            let before = checked.withLock { $0[name] }
            let rulesChanged = before?.rules != profile.rulesFingerprint
            let limitChanged = before?.limit != profile.settings.shadowMaxBytes
            let revoked: [(RevocationReason, [Subscription])] = app.withIndex { index in
                if !profile.enabled {
                    return [(.disabled, index.allSubscriptions())]
                }
                var result: [(RevocationReason, [Subscription])] = [(.expired, index.expiredSubscriptions(now: now))]
                if rulesChanged && !profile.rules.isAllowAll {
                    let denied = index.allSubscriptions().filter { subscription in
                        let auth = subscription.settings.authUID.map { RuleAuth(uid: $0, claims: [:]) }
                        return !profile.rules.canRead(path: subscription.path.segments, auth: auth)
                    }
                    result.append((.permissionDenied, denied))
                }
                if limitChanged {
                    result.append((.tooBig, index.subscriptionsWithShadows(over: profile.settings.shadowMaxBytes)))
                }
                return result
            }
            var complete = true
            for (reason, subscriptions) in revoked where !subscriptions.isEmpty {
                complete = await revoke(subscriptions, reason: reason, app: app, profile: profile, now: now) && complete
            }
            if complete {
                checked.withLock { $0[name] = (profile.rulesFingerprint, profile.settings.shadowMaxBytes) }
            }
        }
    }

    /// Sends the revoke messages, then deletes the subscriptions. False when the deletion must be retried.
    private func revoke(
        _ subscriptions: [Subscription], reason: RevocationReason, app: AppState, profile: AppProfile, now: Int64
    ) async -> Bool {
        let notifications = app.withIndex { $0.revocations(of: subscriptions, reason: reason) }
        let deliveries = dispatcher.prepare(profile: profile, notifications: notifications)
        await withDiscardingTaskGroup { group in
            for delivery in deliveries { group.addTask { _ = await self.dispatcher.send(delivery) } }
        }
        // An expired subscription refreshed while the revokes were out is kept.
        let remove = app.withIndex { index in
            subscriptions.filter { subscription in
                guard let current = index.subscription(path: subscription.path, subscriber: subscription.subscriber) else {
                    return false
                }
                return reason != .expired || current.expiresAt <= now
            }
        }
        do {
            try await stateLog.write(
                remove.map { .subscription(.deletion(app: app.name, path: $0.path, subscriber: $0.subscriber)) })
            logger.info(
                "subscriptions revoked", metadata: ["app": "\(app.name)", "reason": "\(reason.rawValue)", "count": "\(remove.count)"])
            return true
        } catch {
            logger.error("revoked subscriptions not deleted; the next sweep retries", metadata: ["error": "\(error)"])
            return false
        }
    }
}
