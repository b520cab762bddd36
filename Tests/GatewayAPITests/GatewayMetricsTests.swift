import Providers
import XCTest

@testable import Gateway

final class GatewayMetricsTests: XCTestCase {
    func testConsumerLagFromLibrdkafkaStatistics() {
        let metrics = GatewayMetrics()
        let statistics = #"""
            {"name":"c","topics":{"datasync.changes":{"partitions":{"0":{"consumer_lag":12},"1":{"consumer_lag":-1},"-1":{"consumer_lag":-1}}},
             "push.state":{"partitions":{"0":{"consumer_lag":99}}}}}
            """#
        metrics.recordConsumerLag(statistics: Array(statistics.utf8), topic: "datasync.changes")
        let text = metrics.text()
        XCTAssertTrue(text.contains(#"pushgateway_consumer_lag_records{partition="0"} 12"#), text)
        XCTAssertTrue(text.contains(#"pushgateway_consumer_lag_records{partition="1"} 0"#), text)
        XCTAssertFalse(text.contains(#"partition="-1""#))
        XCTAssertFalse(text.contains("99"))
        // Garbage is ignored.
        metrics.recordConsumerLag(statistics: Array("not json".utf8), topic: "datasync.changes")
    }

    func testCountersWithKnownLabelsStartAtZero() {
        let text = GatewayMetrics().text()
        for series in [
            #"pushgateway_dead_letters_total{category="undecodable"} 0"#,
            #"pushgateway_dead_letters_total{category="invalid"} 0"#,
            #"pushgateway_retries_finished_total{outcome="discarded"} 0"#,
            #"pushgateway_app_settings_loads_total{result="refused"} 0"#,
        ] {
            XCTAssertTrue(text.contains(series), "\(series) missing in\n\(text)")
        }
    }

    /// Each kind and set of labels is its own counter, found again by the same ones (the cache's key).
    func testCountersAreFoundByTheirKindAndLabels() {
        let metrics = GatewayMetrics()
        for _ in 0..<3 { metrics.notificationFailed(provider: "fcm", reason: "a") }
        metrics.notificationFailed(provider: "fcm", reason: "b")
        metrics.notificationFailed(provider: "hms", reason: "a")
        for _ in 0..<2 { metrics.notificationSent(provider: "fcm") }
        let text = metrics.text()
        for series in [
            #"pushgateway_notifications_failed_total{provider="fcm",reason="a"} 3"#,
            #"pushgateway_notifications_failed_total{provider="fcm",reason="b"} 1"#,
            #"pushgateway_notifications_failed_total{provider="hms",reason="a"} 1"#,
            #"pushgateway_notifications_sent_total{provider="fcm"} 2"#,
        ] {
            XCTAssertTrue(text.contains(series), "\(series) missing in\n\(text)")
        }
    }

    func testOurFaultFailuresAreCountedApart() {
        let metrics = GatewayMetrics()
        metrics.notificationFailed(provider: "fcm", failure: DeliveryFailure(reason: "THIRD_PARTY_AUTH_ERROR", classification: .ourFault))
        metrics.notificationFailed(provider: "fcm", failure: DeliveryFailure(reason: "UNAVAILABLE", classification: .retryable))
        metrics.notificationFailed(provider: "hms", failure: DeliveryFailure(reason: "hms_80300007", classification: .tokenDead))
        let text = metrics.text()
        XCTAssertTrue(text.contains(#"pushgateway_notifications_our_fault_total{provider="fcm",reason="THIRD_PARTY_AUTH_ERROR"} 1"#), text)
        XCTAssertTrue(text.contains(#"pushgateway_notifications_failed_total{provider="fcm",reason="UNAVAILABLE"} 1"#), text)
        XCTAssertFalse(text.contains(#"pushgateway_notifications_our_fault_total{provider="fcm",reason="UNAVAILABLE"}"#), text)
        XCTAssertFalse(text.contains(#"pushgateway_notifications_our_fault_total{provider="hms""#), text)
    }

    func testProbeAndStateLoadGauges() async throws {
        let metrics = GatewayMetrics()
        metrics.recordProbe(ready: false, stateLoaded: false)
        XCTAssertTrue(metrics.text().contains("pushgateway_ready 0"))
        XCTAssertTrue(metrics.text().contains("pushgateway_state_loaded 0"))
        metrics.recordProbe(ready: true, stateLoaded: true)
        XCTAssertTrue(metrics.text().contains("pushgateway_ready 1"))
        XCTAssertTrue(metrics.text().contains("pushgateway_state_loaded 1"))

        metrics.stateLoaded(seconds: 0.25)
        let line = metrics.text().split(separator: "\n").first { $0.hasPrefix("pushgateway_state_load_duration_seconds ") }
        let seconds = line.flatMap { Double($0.split(separator: " ")[1]) } ?? 0
        XCTAssertTrue(metrics.text().contains("pushgateway_state_loads_total 1"))
        XCTAssertEqual(seconds, 0.25, String(line ?? "no line"))
    }
}
