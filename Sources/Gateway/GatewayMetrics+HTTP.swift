import GatewayAPI
import Prometheus

extension GatewayMetrics: HTTPRequestMetrics {
    /// OpenTelemetry's `http.server.request.duration` in Prometheus' naming, with its buckets.
    static var requestDuration: MetricNameDescriptor {
        MetricNameDescriptor(
            metricName: "http_server_request_duration", unitName: "seconds",
            helpText: "Duration of HTTP API calls, by route pattern, method and status")
    }
    static let requestDurationBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(75), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .milliseconds(750), .seconds(1), .milliseconds(2500), .seconds(5),
        .milliseconds(7500), .seconds(10),
    ]

    public func requestFinished(route: String, method: String, status: Int, duration: Duration) {
        let labels = [("http_route", route), ("http_request_method", method), ("http_response_status_code", String(status))]
        let key = labels.map(\.1).joined(separator: "|")
        let histogram = requestDurations.withLock { cache in
            if let histogram = cache[key] { return histogram }
            let histogram = registry.makeDurationHistogram(
                descriptor: Self.requestDuration, labels: labels, buckets: Self.requestDurationBuckets)
            cache[key] = histogram
            return histogram
        }
        histogram.record(duration)
    }
}
