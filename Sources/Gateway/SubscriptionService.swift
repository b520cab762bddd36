import Foundation
import GatewayAPI
import Logging
import PushCore

/// The v1 REST API's operations on the in-memory store.
///
/// Not yet here (issue 3): auth tokens are accepted but not verified, and there are no read rules, so
/// `permission_denied` is never returned; subscriptions live in memory only.
struct SubscriptionService: SubscriptionAPI {
    let store: SubscriptionStore
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
        let outcome = app.withIndex { index in
            index.subscribe(path: request.path, subscriber: SubscriberKey(kind: .mobile, token: request.deviceID), settings: settings)
        }
        logger.debug(
            "subscribed",
            metadata: ["app": "\(request.app)", "sp": "\(request.path)", "mode": "\(request.mode)", "outcome": "\(outcome)"])
    }

    func unsubscribe(_ request: V1UnsubscribeRequest) async throws(APIError) {
        let app = try app(request.app)
        app.withIndex { index in
            _ = index.unsubscribe(path: request.path, subscriber: SubscriberKey(kind: .mobile, token: request.deviceID))
        }
    }
}

struct Probe: OperationsProbe {
    let readiness: Readiness
    let metrics: GatewayMetrics
    let store: SubscriptionStore

    func notReadyReason() -> String? { readiness.notReadyReason }

    /// Gauges are computed at scrape time from the store (no bookkeeping on the hot path).
    func metricsText() -> String {
        let counts = store.counts()
        metrics.subscriptions.set(Double(counts.subscriptions))
        metrics.shadows.set(Double(counts.shadowsKept))
        return metrics.text()
    }
}
