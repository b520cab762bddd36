import Foundation
import Providers
import PushCore
import XCTest

@testable import Gateway

/// The gateway's own latency (issue 19): `pushgateway_gateway_latency_seconds` counts the first attempt of each
/// notification of a fetched record, when its sender hands the request over; never a retry, nor a notification
/// from no fetched record. `pushgateway_gateway_match_latency_seconds` counts each such record once.
extension DeliveryOrderTests {
    func testGatewayLatencyCountsFirstAttemptsNotRetries() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "d1")
        try await subscribe(harness, device: "d2")
        harness.sender.script("d1", [.failed(DeliveryFailure(reason: "UNAVAILABLE", classification: .retryable))])
        try harness.process(try set("/x", "1"), offset: 0, fetchedAt: Uptime.now)
        await harness.eventually("d1 (after a retry) and d2 delivered") {
            harness.sender.sent(to: "d1").count == 1 && harness.sender.sent(to: "d2").count == 1
        }
        XCTAssertEqual(harness.sender.attempts(to: "d1"), 2)
        XCTAssertEqual(sample(#"pushgateway_gateway_latency_seconds_count{provider="fake"}"#, harness), 2, "d1's and d2's first attempts")
        XCTAssertEqual(sample("pushgateway_gateway_match_latency_seconds_count", harness), 1, "one record")

        // A notification from no fetched record (fetch time unknown) records nothing.
        try harness.process(try set("/x", "2"), offset: 1)
        await harness.eventually("the second value delivered") {
            harness.sender.sent(to: "d1").count == 2 && harness.sender.sent(to: "d2").count == 2
        }
        XCTAssertEqual(sample(#"pushgateway_gateway_latency_seconds_count{provider="fake"}"#, harness), 2)
        XCTAssertEqual(sample("pushgateway_gateway_match_latency_seconds_count", harness), 1)
        // The fetch time is transient: the stored retry line does not carry it.
        XCTAssertFalse(stateRecords(harness).contains { $0.value?.contains("fetch") == true })
    }

    /// The value of the sample `series` (name and labels as exposed) in the harness's /metrics text, nil if absent.
    private func sample(_ series: String, _ harness: GatewayHarness) -> Double? {
        harness.metrics.text().split(separator: "\n").lazy
            .first { $0.hasPrefix(series + " ") }
            .flatMap { Double($0.dropFirst(series.count + 1)) }
    }
}
