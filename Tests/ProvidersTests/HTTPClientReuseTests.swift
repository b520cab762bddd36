import CurlHTTP
import Foundation
import TestSupport
import XCTest

/// CurlHTTP's per-request shortcuts against the fake FCM (h2c): easy handles reused with the options of the
/// previous request, header lists shared between requests, the body sent from the handle's own buffer, proxies
/// read once, response headers kept only when asked for.
final class HTTPClientReuseTests: FakeServerTestCase<FakeFCMProcess> {
    private struct Sent {
        let project: String
        let body: [UInt8]
        let headers: [(name: String, value: String)]
    }

    /// One request at a time, so each reuses the handle of the one before: bodies longer and shorter than the
    /// last, other URLs, other and repeated header lists, a GET (other options) in between.
    func testReusedHandlesSendEachRequestsOwnURLBodyAndHeaders() async throws {
        let long = Array(#"{"message":{"token":"\#(String(repeating: "L", count: 3000))"}}"#.utf8)
        let sequence = [
            Sent(project: "p1", body: Array(#"{"message":{"token":"a"}}"#.utf8),
                 headers: [("Authorization", "Bearer one"), ("X-Seq", "1")]),
            Sent(project: "p2", body: long, headers: [("Authorization", "Bearer two"), ("X-Seq", "2"), ("X-Only-Two", "yes")]),
            Sent(project: "p1", body: Array(#"{"m":1}"#.utf8), headers: [("Authorization", "Bearer one"), ("X-Seq", "3")]),
            Sent(project: "p3", body: Array(#"{"message":{"token":"a"}}"#.utf8),
                 headers: [("Authorization", "Bearer one"), ("X-Seq", "1")]),
        ]
        for (index, sent) in sequence.enumerated() {
            let response = try await http.send(HTTPRequest(
                method: .post, url: fake.baseURL + "/v1/projects/\(sent.project)/messages:send", headers: sent.headers,
                body: sent.body))
            XCTAssertEqual(response.status, 401, "request \(index)")  // unknown bearer token
            if index == 1 {
                // Other options (a GET without body) on the same handle, then back to POSTs.
                let listing = try await http.send(HTTPRequest(url: fake.baseURL + "/_fake/requests"))
                XCTAssertEqual(listing.status, 200)
            }
        }
        let recorded = try await fake.requests(http)
        let sends = try XCTUnwrap(recorded["sends"] as? [[String: Any]])
        XCTAssertEqual(sends.count, sequence.count)
        for (index, (sent, record)) in zip(sequence, sends).enumerated() {
            XCTAssertEqual(record["project"] as? String, sent.project, "request \(index)")
            XCTAssertEqual(record["body"] as? String, String(decoding: sent.body, as: UTF8.self), "request \(index)")
            let headers = try XCTUnwrap(record["headers"] as? [String: String])
            for (name, value) in sent.headers {
                XCTAssertEqual(headers[name.lowercased()], value, "request \(index)")
            }
            XCTAssertEqual(headers["x-only-two"] != nil, index == 1, "request \(index)")
            XCTAssertEqual(headers["content-length"], "\(sent.body.count)", "request \(index)")
        }
    }

    /// Many requests at once, each with its own body and token, so handles are reused while others are in
    /// flight: every request reaches the server with exactly its own body and header.
    func testConcurrentReuseNeverMixesBodiesOrHeaders() async throws {
        let url = fake.baseURL + "/v1/projects/p/messages:send"
        let http = self.http!
        for round in 0..<3 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<100 {
                    group.addTask {
                        let padding = String(repeating: "x", count: (index * 37) % 1500)
                        let response = try await http.send(HTTPRequest(
                            method: .post, url: url, headers: [("Authorization", "Bearer r\(round)-\(index % 3)")],
                            body: Array(#"{"r":\#(round),"i":\#(index),"pad":"\#(padding)"}"#.utf8)))
                        XCTAssertEqual(response.status, 401)
                    }
                }
                try await group.waitForAll()
            }
        }
        let recorded = try await fake.requests(http)
        let sends = try XCTUnwrap(recorded["sends"] as? [[String: Any]])
        XCTAssertEqual(sends.count, 300)
        var seen = Set<String>()
        for record in sends {
            let body = try XCTUnwrap(record["body"] as? String)
            let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any], body)
            let round = try XCTUnwrap(json["r"] as? Int)
            let index = try XCTUnwrap(json["i"] as? Int)
            XCTAssertEqual((json["pad"] as? String)?.count, (index * 37) % 1500)
            let headers = try XCTUnwrap(record["headers"] as? [String: String])
            XCTAssertEqual(headers["authorization"], "Bearer r\(round)-\(index % 3)")
            seen.insert("\(round)/\(index)")
        }
        XCTAssertEqual(seen.count, 300)
    }

    func testOnlyTheAskedForResponseHeadersAreKept() async throws {
        var request = HTTPRequest(url: fake.baseURL + "/_fake/requests")
        request.responseHeaderNames = ["Content-TYPE", "x-absent"]
        let filtered = try await http.send(request)
        XCTAssertEqual(filtered.headers.map(\.name), ["content-type"])
        XCTAssertEqual(filtered.header("content-type"), "application/json; charset=UTF-8")
        let all = try await http.send(HTTPRequest(url: fake.baseURL + "/_fake/requests"))
        XCTAssertGreaterThan(all.headers.count, 1)
    }

    func testProxySettingsFollowLibcurlsEnvironmentRules() {
        let environment = [
            "HTTP_PROXY": "http://ignored:1", "HTTPS_PROXY": "http://secure:3128", "all_proxy": "socks5://all:1080",
            "NO_PROXY": "internal,10.0.0.0/8", "https_proxy": "",
        ]
        let settings = ProxySettings { environment[$0] }
        XCTAssertEqual(settings, ProxySettings(
            httpProxy: "socks5://all:1080", httpsProxy: "http://secure:3128", noProxy: "internal,10.0.0.0/8"))
        XCTAssertEqual(ProxySettings { _ in nil }, .none)
        let lowercase = ["http_proxy": "http://plain:8080", "https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2"]
        XCTAssertEqual(ProxySettings { lowercase[$0] }, ProxySettings(httpProxy: "http://plain:8080", httpsProxy: "http://lower:1"))
    }

    /// A configured proxy is used (here one that refuses connections), `noProxy` bypasses it.
    func testConfiguredProxyIsUsedUnlessTheHostIsExempt() async throws {
        let deadProxy = "http://127.0.0.1:\(try unusedPort())"
        let proxied = try HTTPClient(
            configuration: HTTPClientConfiguration(proxy: ProxySettings(httpProxy: deadProxy)), logger: testLogger("test.proxy"))
        do {
            _ = try await proxied.send(HTTPRequest(url: fake.baseURL + "/_fake/requests", timeout: .seconds(5)))
            XCTFail("expected the dead proxy to fail the request")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error.curlCode, 7, "\(error)")  // CURLE_COULDNT_CONNECT (to the proxy)
        }
        await proxied.shutdown()
        let exempt = try HTTPClient(
            configuration: HTTPClientConfiguration(proxy: ProxySettings(httpProxy: deadProxy, noProxy: "127.0.0.1")),
            logger: testLogger("test.proxy"))
        let response = try await exempt.send(HTTPRequest(url: fake.baseURL + "/_fake/requests", timeout: .seconds(5)))
        XCTAssertEqual(response.status, 200)
        await exempt.shutdown()
    }

    /// The environment is read when a client is created, not per request.
    func testProxyEnvironmentIsReadOnceWhenTheClientIsCreated() async throws {
        let deadProxy = "http://127.0.0.1:\(try unusedPort())"
        let before = try HTTPClient(logger: testLogger("test.proxy"))
        for name in ["http_proxy", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] where getenv(name) != nil {
            throw XCTSkip("\(name) is set in the test environment")
        }
        setenv("http_proxy", deadProxy, 1)
        defer { unsetenv("http_proxy") }
        let response = try await before.send(HTTPRequest(url: fake.baseURL + "/_fake/requests", timeout: .seconds(5)))
        XCTAssertEqual(response.status, 200, "a client must not see a proxy set after its creation")
        await before.shutdown()

        let after = try HTTPClient(logger: testLogger("test.proxy"))
        do {
            _ = try await after.send(HTTPRequest(url: fake.baseURL + "/_fake/requests", timeout: .seconds(5)))
            XCTFail("expected the proxy from the environment to be used")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error.curlCode, 7, "\(error)")
        }
        await after.shutdown()
    }

    private func unusedPort() throws -> Int {
        guard let port = LoopbackPort.free() else { throw FakeServerProcess.Failure(description: "bind failed") }
        return port
    }
}
