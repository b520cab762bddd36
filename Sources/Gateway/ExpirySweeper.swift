import Foundation
import KafkaClient
import Logging
import PushCore
import ServiceLifecycle

/// Revokes expired subscriptions (reason `expired`, seed 000): every `subscriptions.expirySweepSeconds`, for
/// each app whose change partition this replica owns, it sends the revoke message to the expired
/// subscriptions, then deletes them from the state topic. Revoke first, delete second: a crash in between
/// sends the revoke again rather than losing it. A subscription refreshed meanwhile is left alone.
final class ExpirySweeper: Service, Sendable {
    private let store: SubscriptionStore
    private let stateLog: StateLog
    private let dispatcher: Dispatcher
    private let ownership: Ownership
    private let interval: Duration
    private let logger: Logger

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

    func run() async throws {
        await stateLog.waitUntilLoaded()
        while !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: self.interval) }
            } catch {
                return
            }
            await sweep(now: Int64(Date().timeIntervalSince1970))
        }
    }

    func sweep(now: Int64) async {
        for name in store.appNames {
            guard ownership.owns(app: name), let app = store.app(name) else { continue }
            let (expired, revocations) = app.withIndex { index in
                let expired = index.expiredSubscriptions(now: now)
                return (expired, index.revocations(of: expired, reason: .expired))
            }
            guard !expired.isEmpty else { continue }
            let deliveries = dispatcher.prepare(app: name, notifications: revocations)
            await withDiscardingTaskGroup { group in
                for delivery in deliveries { group.addTask { _ = await self.dispatcher.send(delivery) } }
            }
            // Skip any that were refreshed while the revokes were out.
            let stillExpired = app.withIndex { index in
                expired.filter { (index.subscription(path: $0.path, subscriber: $0.subscriber)?.expiresAt ?? .max) <= now }
            }
            do {
                try await stateLog.write(
                    stillExpired.map { .subscription(.deletion(app: name, path: $0.path, subscriber: $0.subscriber)) })
                logger.info("expired subscriptions revoked", metadata: ["app": "\(name)", "count": "\(stillExpired.count)"])
            } catch {
                logger.error("expired subscriptions not deleted; the next sweep retries", metadata: ["error": "\(error)"])
            }
        }
    }
}
