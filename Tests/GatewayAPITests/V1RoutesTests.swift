import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import PushCore
import XCTest

@testable import Gateway
@testable import GatewayAPI

final class V1RoutesTests: XCTestCase {
    struct Fixture {
        let harness: GatewayHarness
        let health: Health
        let app: Application<RouterResponder<GatewayRequestContext>>
    }

    func makeFixture() async throws -> Fixture {
        var off = AppSettings()
        off.enabled = false
        let harness = try GatewayHarness(apps: ["toto": AppSettings(), "off": off])
        try await harness.start()
        addTeardownBlock { await harness.stop() }
        let health = Health()
        let router = Routes.router(
            subscriptions: harness.service, v2: harness.service,
            probe: Probe(health: health, store: harness.store, metrics: harness.metrics))
        return Fixture(harness: harness, health: health, app: Application(router: router))
    }

    static func subscriptions(_ harness: GatewayHarness, _ app: String = "toto") -> [Subscription] {
        harness.subscriptions(app)
    }

    static func errorBody(_ response: TestResponse) throws -> [String: String] {
        let object = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: String]
        return try XCTUnwrap(object)
    }

    /// A client cannot choose its own rate-limit key: `x-push-client-address` is believed only from an authentic
    /// hop between replicas (issue 17), never from the request.
    func testAClientSentClientAddressIsNotBelieved() async throws {
        var quotas = AppQuotas()
        quotas.clientWritesPerSecond = 0.001
        quotas.clientWriteBurst = 2
        var settings = AppSettings()
        settings.quotas = quotas
        let harness = try GatewayHarness(apps: ["toto": settings])
        try await harness.start()
        addTeardownBlock { await harness.stop() }
        let router = Routes.router(
            subscriptions: harness.service, v2: harness.service, probe: Probe(health: Health(), store: harness.store, metrics: harness.metrics))
        try await Application(router: router).test(.router) { client in
            var statuses: [HTTPResponse.Status] = []
            for n in 0..<3 {
                try await client.execute(
                    uri: "/base/toto/.wakeup/x?id=dev\(n)", method: .put, headers: [ClientAddress.header: "198.51.100.\(n)"]
                ) { response in statuses.append(response.status) }
            }
            XCTAssertEqual(statuses, [.noContent, .noContent, .tooManyRequests])
        }
    }

    func testSubscribeRefreshAndUnsubscribe() async throws {
        let fixture = try await makeFixture()
        try await fixture.app.test(.router) { client in
            try await client.execute(uri: "/base/toto/.wakeup/some/webcom/path?id=dev1&mode=value", method: .put) { response in
                XCTAssertEqual(response.status, .noContent)
            }
            try await client.execute(uri: "/base/toto/.wakeup/some/webcom/path/?id=dev1&mode=childEvent", method: .put) { response in
                XCTAssertEqual(response.status, .noContent)
            }
            let all = Self.subscriptions(fixture.harness)
            XCTAssertEqual(all.count, 1)
            XCTAssertEqual(all.first?.path.description, "/some/webcom/path")
            XCTAssertEqual(all.first?.settings.mode, .childEvent)
            XCTAssertEqual(all.first?.subscriber.token, "dev1")
            try await client.execute(uri: "/base/toto/.wakeup/some/webcom/path?id=dev1", method: .delete) { response in
                XCTAssertEqual(response.status, .noContent)
            }
            XCTAssertTrue(Self.subscriptions(fixture.harness).isEmpty)
        }
    }

    func testDefaultsRootAndEncoding() async throws {
        let fixture = try await makeFixture()
        try await fixture.app.test(.router) { client in
            for uri in ["/base/toto/.wakeup?id=a", "/base/toto/.wakeup/?id=b", "/base/toto/.wakeup/caf%C3%A9/x%20y?id=c%3Ad&mode=null"] {
                try await client.execute(uri: uri, method: .put) { response in XCTAssertEqual(response.status, .noContent, uri) }
            }
            let byToken = Dictionary(uniqueKeysWithValues: Self.subscriptions(fixture.harness).map { ($0.subscriber.token, $0) })
            XCTAssertEqual(byToken["a"]?.path, .root)
            XCTAssertEqual(byToken["b"]?.path, .root)
            XCTAssertEqual(byToken["c:d"]?.path.description, "/café/x y")
            XCTAssertEqual(byToken["a"]?.settings.mode, .noData)
            XCTAssertEqual(byToken["c:d"]?.settings.mode, .noData)
            let ttl = AppSettings().subscriptionTTLSeconds
            let expiry = try XCTUnwrap(byToken["a"]?.settings.expiresAt)
            XCTAssertEqual(Double(expiry), Date().timeIntervalSince1970 + Double(ttl), accuracy: 5)
        }
    }

    func testErrors() async throws {
        let fixture = try await makeFixture()
        typealias Case = (uri: String, method: HTTPRequest.Method, status: HTTPResponse.Status, code: String)
        let longPath: String = "/base/toto/.wakeup/" + String(repeating: "a", count: 2048) + "?id=x"
        let cases: [Case] = [
            ("/base/nope/.wakeup/a?id=x", .put, .notFound, "namespace_does_not_exist"),
            ("/base/nope/.wakeup/a?id=x", .delete, .notFound, "namespace_does_not_exist"),
            ("/base/off/.wakeup/a?id=x", .put, .forbidden, "disabled"),
            ("/base/toto/.wakeup/a", .put, .badRequest, "bad_request"),
            ("/base/toto/.wakeup/a?id=", .put, .badRequest, "bad_request"),
            ("/base/toto/.wakeup/a", .delete, .badRequest, "bad_request"),
            ("/base/toto/.wakeup/a?id=x&mode=values", .put, .badRequest, "bad_request"),
            ("/base/toto/.wakeup/a.b?id=x", .put, .badRequest, "bad_request"),
            ("/base/toto/.wakeup/a/%24x?id=x", .put, .badRequest, "bad_request"),
            ("/base/toto/.wakeup/a%23?id=x", .put, .badRequest, "bad_request"),
            ("/base/toto/.wakeup/%5B0%5D?id=x", .put, .badRequest, "bad_request"),
            ("/base/toto/.wakeup/a//b?id=x", .put, .badRequest, "bad_request"),
            ("/base/toto/.wakeup/a%01?id=x", .put, .badRequest, "bad_request"),
            (longPath, .put, .badRequest, "bad_request"),
            ("/base/toto/.wakeup/a//?id=x", .put, .badRequest, "bad_request"),
        ]
        try await fixture.app.test(.router) { client in
            for (uri, method, status, code) in cases {
                try await client.execute(uri: uri, method: method) { response in
                    XCTAssertEqual(response.status, status, "\(method) \(uri.prefix(80))")
                    XCTAssertEqual(response.headers[.contentType], "application/json")
                    let body = try Self.errorBody(response)
                    XCTAssertEqual(body["status"], code, uri)
                    XCTAssertFalse(body["message", default: ""].isEmpty)
                }
            }
            // 2047 bytes of key + the leading "/" is exactly 2048: accepted.
            try await client.execute(uri: "/base/toto/.wakeup/" + String(repeating: "a", count: 2047) + "?id=x", method: .put) { response in
                XCTAssertEqual(response.status, .noContent)
            }
        }
        XCTAssertEqual(Self.subscriptions(fixture.harness).count, 1)
    }

    func testOperationsEndpoints() async throws {
        let fixture = try await makeFixture()
        try await fixture.app.test(.router) { client in
            try await client.execute(uri: "/healthz", method: .get) { XCTAssertEqual($0.status, .ok) }
            try await client.execute(uri: "/readyz", method: .get) { response in
                XCTAssertEqual(response.status, .serviceUnavailable)
                XCTAssertEqual(try Self.errorBody(response)["status"], "not_ready")
            }
            fixture.health.ownership.take([])
            try await client.execute(uri: "/readyz", method: .get) { XCTAssertEqual($0.status, .ok) }
            try await client.execute(uri: "/metrics", method: .get) { response in
                XCTAssertEqual(response.status, .ok)
                XCTAssertTrue(String(buffer: response.body).contains("pushgateway_events_consumed_total"))
            }
            try await client.execute(uri: "/openapi.json", method: .get) { response in
                XCTAssertEqual(response.status, .ok)
                XCTAssertNoThrow(try JSONSerialization.jsonObject(with: Data(buffer: response.body)))
            }
        }
    }

    func testUnmatchedRoutesAndDeviceIDLimits() async throws {
        let fixture = try await makeFixture()
        try await fixture.app.test(.router) { client in
            try await client.execute(uri: "/healthz", method: .post) { response in
                XCTAssertEqual(response.status, .methodNotAllowed)
                XCTAssertEqual(response.headers[.allow], "GET, HEAD")
                XCTAssertEqual(try Self.errorBody(response)["status"], "method_not_allowed")
            }
            try await client.execute(uri: "/base/toto/.wakeup/a?id=x", method: .get) { response in
                XCTAssertEqual(response.status, .methodNotAllowed)
                XCTAssertEqual(response.headers[.allow], "PUT, DELETE")
            }
            try await client.execute(uri: "/nothing", method: .put) { response in
                XCTAssertEqual(response.status, .notFound)
                XCTAssertEqual(try Self.errorBody(response)["status"], "not_found")
            }
            try await client.execute(uri: "/healthz", method: .head) { response in
                XCTAssertEqual(response.status, .ok)
                XCTAssertEqual(response.body.readableBytes, 0)
            }
            let long = String(repeating: "x", count: 1025)
            for bad in ["?id=" + long, "?id=%ZZ", "?id=a%20b", "?id=a%0Ab", "?id=caf%C3%A9"] {
                try await client.execute(uri: "/base/toto/.wakeup/a" + bad, method: .put) { response in
                    XCTAssertEqual(response.status, .badRequest, String(bad.prefix(20)))
                }
            }
            try await client.execute(uri: "/base/toto/.wakeup/a?id=" + String(repeating: "x", count: 1024), method: .put) { response in
                XCTAssertEqual(response.status, .noContent)
            }
        }
    }
}
