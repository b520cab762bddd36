import GatewayCore
import Foundation
import GatewayLogging
import Logging
import PushCore
import Rules
import ServiceLifecycle
import Synchronization

/// Revokes, in each partition this replica owns, the subscriptions that settings or time have made invalid
/// (SPEC §8):
///
/// - `disabled`: every subscription of an app switched off;
/// - `permission_denied`: those the app's read rules no longer allow, re-checked when the rules changed
///   (and when this replica takes the partition over), with the uid each was made with;
/// - `too_big`: `value`/`childEvent` subscriptions whose node's data is over the app's limit, re-checked when
///   the limit changed;
/// - `expired`: past their expiry time (matching already skips them).
///
/// The revocation point is when the sweep applies new settings (at once after a change: ``poke()``), under
/// the partition's lock: from then on the subscriptions match nothing, and their revokes are queued behind the
/// notifications of the events matched before (``PartitionState/revoke(app:delivery:now:select:)``). It also
/// runs every `interval` for expiries.
final class RevocationSweeper: Service, Sendable {
    private let store: StateStore
    private let profiles: AppProfiles
    private let delivery: any DeliveryInput
    private let metrics: GatewayMetrics
    private let interval: Duration
    private let logger: Logger
    private let wake = WakeSignal()

    init(
        store: StateStore, profiles: AppProfiles, delivery: any DeliveryInput, metrics: GatewayMetrics, interval: Duration,
        logger: Logger
    ) {
        self.store = store
        self.profiles = profiles
        self.delivery = delivery
        self.metrics = metrics
        self.interval = interval
        self.logger = logger
    }

    /// Asks for a sweep now (settings changed, a partition was taken over).
    func poke() { wake.signal() }

    func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            sweep(now: Date().timeIntervalSince1970)
            await withGracefulShutdownHandler {
                await self.wake.wait(timeout: self.interval)
            } onGracefulShutdown: {
                self.wake.signal()
            }
        }
    }

    func sweep(now: Double) {
        for partition in store.ownedPartitions {
            for name in partition.appNames {
                guard let profile = profiles.profile(name) else { continue }  // not served: its subscriptions are kept
                let (counts, afterOffset) = partition.revoke(app: name, delivery: delivery, now: now) { app in
                    Self.select(app, profile: profile, now: Int64(now))
                }
                for (reason, count) in counts {
                    metrics.revoked(reason: reason.rawValue, count: count)
                    logger.notice(
                        "subscriptions revoked",
                        metadata: [
                            LoggingKeys.app: "\(name)", LoggingKeys.reason: "\(reason.rawValue)", LoggingKeys.count: "\(count)",
                            LoggingKeys.kafkaPartition: "\(partition.partition)", LoggingKeys.revocationAfterOffset: "\(afterOffset)",
                        ])
                }
            }
        }
    }

    /// What to revoke in `app` (under its partition's lock), and what was checked.
    static func select(_ app: AppData, profile: AppProfile, now: Int64) -> [(RevocationReason, [Subscription])] {
        guard profile.enabled else {
            app.checkedEnabled = false
            return app.index.subscriptionCount > 0 ? [(.disabled, app.index.allSubscriptions())] : []
        }
        var result: [(RevocationReason, [Subscription])] = []
        if app.checkedRules != profile.rulesFingerprint || app.checkedEnabled != true {
            if !profile.rules.isAllowAll {
                var denied: [Subscription] = []
                app.index.forEachSubscription { subscription in
                    let auth = subscription.settings.authUID.map { RuleAuth(uid: $0) }
                    if !profile.rules.canRead(path: subscription.path.segments, auth: auth) { denied.append(subscription) }
                }
                if !denied.isEmpty { result.append((.permissionDenied, denied)) }
            }
            app.checkedRules = profile.rulesFingerprint
        }
        if app.checkedShadowLimit != profile.settings.shadowMaxBytes {
            let over = app.index.subscriptionsWithShadows(over: profile.settings.shadowMaxBytes)
            if !over.isEmpty { result.append((.tooBig, over)) }
            app.checkedShadowLimit = profile.settings.shadowMaxBytes
        }
        app.checkedEnabled = true
        let expired = app.index.expiredSubscriptions(now: now)
        if !expired.isEmpty { result.append((.expired, expired)) }
        return result
    }
}
