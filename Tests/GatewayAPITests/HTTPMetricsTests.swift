import Foundation
import Hummingbird
import HummingbirdTesting
import XCTest

@testable import Gateway
@testable import GatewayAPI

/// `http_server_request_duration_seconds` (OpenTelemetry's `http.server.request.duration`): one series per route
/// pattern, method and status; never a raw path or a client-chosen method.
final class HTTPMetricsTests: XCTestCase {
    func testEachCallIsTimedByRoutePatternMethodAndStatus() async throws {
        let harness = try GatewayHarness(apps: ["toto": AppSettings()])
        try await harness.start()
        addTeardownBlock { await harness.stop() }
        let router = Routes.router(
            subscriptions: harness.service, v2: harness.service,
            probe: Probe(health: Health(), store: harness.store, metrics: harness.metrics), metrics: harness.metrics)
        try await Application(router: router).test(.router) { client in
            for n in 0..<3 {
                try await client.execute(uri: "/base/toto/.wakeup/a/b\(n)?id=dev\(n)", method: .put) { XCTAssertEqual($0.status, .noContent) }
            }
            try await client.execute(uri: "/base/toto/.wakeup/a?id=", method: .put) { XCTAssertEqual($0.status, .badRequest) }
            try await client.execute(uri: "/healthz", method: .get) { XCTAssertEqual($0.status, .ok) }
            try await client.execute(uri: "/no/such/path/\(UUID().uuidString)", method: .get) { XCTAssertEqual($0.status, .notFound) }
            try await client.execute(uri: "/healthz", method: .init("BREW")!) { XCTAssertEqual($0.status, .methodNotAllowed) }
        }
        let text = harness.metrics.text()
        func count(_ labels: String) -> String? {
            let prefix = "http_server_request_duration_seconds_count{\(labels)} "
            return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
        }
        let wakeup = #"http_route="/base/{app}/.wakeup/**",http_request_method="PUT""#
        XCTAssertEqual(count(wakeup + #",http_response_status_code="204""#), "3", text)
        XCTAssertEqual(count(wakeup + #",http_response_status_code="400""#), "1", text)
        XCTAssertEqual(count(#"http_route="/healthz",http_request_method="GET",http_response_status_code="200""#), "1", text)
        XCTAssertFalse(text.contains("no/such/path"), "a raw path became a label")
        XCTAssertFalse(text.contains("BREW"), "a client's method became a label")
        XCTAssertTrue(text.contains(#"http_request_method="_OTHER""#), text)
    }
}
