import Foundation
import GatewayAPI
import Logging
import PushCore

/// The v1 REST API's operations. A change is written to the state topic and answered once this replica has
/// applied it (``StateLog``): durable and live.
///
/// Not yet here (issue 3): auth tokens are accepted but not verified, and there are no read rules, so
/// `permission_denied` is never returned.
struct SubscriptionService: SubscriptionAPI {
    let store: SubscriptionStore
    let writer: any SubscriptionWriter
    let metrics: GatewayMetrics
    let logger: Logger

    func app(_ name: String) throws(APIError) -> AppState {
        guard let app = store.app(name) else { throw .namespaceDoesNotExist(name) }
        guard app.settings.enabled else { throw .disabled(name) }
        return app
    }

    func subscribe(_ request: V1SubscribeRequest) async throws(APIError) {
        let app = try app(request.app)
        let expiresAt = Int64(Date().timeIntervalSince1970) + app.settings.subscriptionTTLSeconds
        let settings = SubscriptionSettings(mode: request.mode, format: .v1, expiresAt: expiresAt)
        let subscription = Subscription(
            path: request.path, subscriber: SubscriberKey(kind: .mobile, token: request.deviceID), settings: settings)
        try await write(SubscriptionRecord(app: app.name, subscription: subscription))
        logger.debug("subscribed", metadata: ["app": "\(request.app)", "sp": "\(request.path)", "mode": "\(request.mode)"])
    }

    func unsubscribe(_ request: V1UnsubscribeRequest) async throws(APIError) {
        let app = try app(request.app)
        try await write(
            .deletion(app: app.name, path: request.path, subscriber: SubscriberKey(kind: .mobile, token: request.deviceID)))
    }

    private func write(_ record: SubscriptionRecord) async throws(APIError) {
        do {
            try await writer.write([.subscription(record)])
        } catch {
            logger.error("subscription not stored", metadata: ["app": "\(record.app)", "error": "\(error)"])
            throw .unavailable("the subscription could not be stored; retry later")
        }
    }
}

struct Probe: OperationsProbe {
    let readiness: Readiness
    let stateLog: StateLog?
    let metrics: GatewayMetrics
    let store: SubscriptionStore

    func notReadyReason() -> String? {
        if let stateLog, !stateLog.isLoaded { return "loading subscriptions from the state topic" }
        return readiness.notReadyReason
    }

    /// Gauges are computed at scrape time from the store (no bookkeeping on the hot path).
    func metricsText() -> String {
        let counts = store.counts()
        metrics.subscriptions.set(Double(counts.subscriptions))
        metrics.shadows.set(Double(counts.shadowsKept))
        return metrics.text()
    }
}
