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
}
