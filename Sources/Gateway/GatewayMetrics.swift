import Prometheus
import Synchronization

/// The gateway's metrics, in one Prometheus registry (served at `/metrics`). Names follow Prometheus
/// conventions with a `pushgateway_` prefix; labels have low cardinality (provider, reason, result).
public final class GatewayMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()

    public let eventsConsumed: Counter
    public let eventsDeadLettered: Counter
    public let eventsSkipped: Counter
    public let eventsMatched: Counter
    public let subscriptions: Gauge
    public let shadows: Gauge
    public let inFlightRecords: Gauge
    public let latency: ValueHistogram
    private let counters = Mutex<[String: Counter]>([:])

    public init() {
        eventsConsumed = registry.makeCounter(
            name: "pushgateway_events_consumed_total", labels: [("result", "ok")], help: "Change events consumed")
        eventsDeadLettered = registry.makeCounter(
            name: "pushgateway_events_consumed_total", labels: [("result", "dead_letter")], help: "Change events consumed")
        eventsSkipped = registry.makeCounter(
            name: "pushgateway_events_consumed_total", labels: [("result", "unknown_app")], help: "Change events consumed")
        eventsMatched = registry.makeCounter(
            name: "pushgateway_events_matched_total", help: "Change events that matched at least one subscription")
        subscriptions = registry.makeGauge(name: "pushgateway_subscriptions", help: "Subscriptions held in memory")
        shadows = registry.makeGauge(name: "pushgateway_shadows", help: "Nodes whose data is kept for value/childEvent subscriptions")
        inFlightRecords = registry.makeGauge(
            name: "pushgateway_records_in_flight", help: "Consumed records whose notifications are not yet handed over")
        latency = registry.makeValueHistogram(
            name: "pushgateway_end_to_end_latency_seconds",
            buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
            help: "From the change event's timestamp to the provider's answer")
    }

    private func counter(_ name: String, _ labels: [(String, String)], help: String) -> Counter {
        let key = name + labels.map { "|\($0.0)=\($0.1)" }.joined()
        return counters.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = registry.makeCounter(name: name, labels: labels, help: help)
            cache[key] = counter
            return counter
        }
    }

    public func notificationSent(provider: String) {
        counter("pushgateway_notifications_sent_total", [("provider", provider)], help: "Notifications accepted by a provider").increment()
    }

    public func notificationFailed(provider: String, reason: String) {
        counter(
            "pushgateway_notifications_failed_total", [("provider", provider), ("reason", reason)],
            help: "Notifications a provider refused or that could not be sent"
        ).increment()
    }

    public func revoked(reason: String) {
        counter("pushgateway_revocations_total", [("reason", reason)], help: "Subscriptions revoked").increment()
    }

    public func deadLetter(category: String) {
        counter("pushgateway_dead_letters_total", [("category", category)], help: "Records written to the dead-letter topic").increment()
    }

    public func text() -> String { registry.emitToString() }
}
