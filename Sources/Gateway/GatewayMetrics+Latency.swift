import Prometheus
import Providers

/// The gateway's own latency: from the consumer's poll returning a record to its notifications' provider requests
/// being handed to the HTTP client (first attempts only), without the broker's part before the fetch.
extension GatewayMetrics {
    /// Fine buckets: the target is a p99 of a few milliseconds.
    static let gatewayLatencyBuckets: [Double] = [
        0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05,
        0.1, 0.25, 0.5, 1,
    ]

    static var gatewayLatencyName: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "pushgateway", metricName: "gateway_latency", unitName: "seconds",
            helpText: "From the consumer's poll returning a change record to the provider request of one of its notifications being handed to the HTTP client (first attempts)")
    }

    static var matchLatencyName: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "pushgateway", metricName: "gateway_match_latency", unitName: "seconds",
            helpText: "From the consumer's poll returning a change record to its notifications being queued for delivery (once per record with notifications)")
    }

    /// Where the first attempts of `provider`'s notifications record their latency (``RequestSubmission``), from
    /// a cache under a lock: the delivery path resolves its providers' recorders once (``GatewayLatencyRecorders``).
    func gatewayLatency(provider: String) -> GatewayLatencyRecorder {
        gatewayLatencies.withLock { cache in
            if let recorder = cache[provider] { return recorder }
            let recorder = GatewayLatencyRecorder(
                registry.makeValueHistogram(
                    descriptor: Self.gatewayLatencyName, labels: [("provider", provider)], buckets: Self.gatewayLatencyBuckets))
            cache[provider] = recorder
            return recorder
        }
    }

    /// A record's notifications were queued for delivery `nanoseconds` after its fetch.
    func notificationsQueued(afterNanoseconds nanoseconds: UInt64) {
        matchLatency.record(Double(nanoseconds) / 1e9)
    }
}

/// The recorders of `pushgateway_gateway_latency_seconds` of the providers' senders (`fcm`, `hms`, `apns`, `webhook`, `webpush`),
/// resolved once when the delivery service is made, so that a first attempt reads its recorder without a lock.
/// Another provider (a test's sender) is resolved through the metrics' cache.
struct GatewayLatencyRecorders: Sendable {
    static let providers = ["fcm", "hms", "apns", "webhook", "webpush"]

    private let metrics: GatewayMetrics
    private let resolved: [String: GatewayLatencyRecorder]

    init(metrics: GatewayMetrics, providers: [String] = Self.providers) {
        self.metrics = metrics
        resolved = Dictionary(uniqueKeysWithValues: providers.map { ($0, metrics.gatewayLatency(provider: $0)) })
    }

    func recorder(provider: String) -> GatewayLatencyRecorder { resolved[provider] ?? metrics.gatewayLatency(provider: provider) }
}

/// One provider's series of `pushgateway_gateway_latency_seconds`.
final class GatewayLatencyRecorder: SubmissionObserver {
    private let histogram: ValueHistogram

    init(_ histogram: ValueHistogram) { self.histogram = histogram }

    func submitted(afterNanoseconds nanoseconds: UInt64) { histogram.record(Double(nanoseconds) / 1e9) }
}
