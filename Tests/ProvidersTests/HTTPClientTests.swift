import CurlHTTP
import Foundation
import TestSupport
import XCTest

/// CurlHTTP against the fake FCM server over h2c (prior knowledge).
final class HTTPClientTests: FakeServerTestCase<FakeFCMProcess> {
    func testUsesHTTP2WithPriorKnowledge() async throws {
        let response = try await http.send(HTTPRequest(url: fake.baseURL + "/_fake/requests"))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.version, .http2)
        XCTAssertEqual(response.header("Content-Type"), "application/json; charset=UTF-8")
        XCTAssertNotNil(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
    }

    func testPostBodyAndHeadersArriveIntact() async throws {
        let body = Array(#"{"message":{"token":"x"}}"#.utf8)
        let response = try await http.send(HTTPRequest(
            method: .post, url: fake.baseURL + "/v1/projects/p/messages:send",
            headers: [("Authorization", "Bearer nope"), ("Content-Type", "application/json"), ("X-Empty", "")],
            body: body))
        XCTAssertEqual(response.status, 401)  // unknown bearer token
        let recorded = try await fake.requests(http)
        let send = try XCTUnwrap((recorded["sends"] as? [[String: Any]])?.first)
        XCTAssertEqual(send["body"] as? String, String(decoding: body, as: UTF8.self))
        XCTAssertEqual(send["http_version"] as? String, "2")
        let headers = try XCTUnwrap(send["headers"] as? [String: String])
        XCTAssertEqual(headers["authorization"], "Bearer nope")
        XCTAssertEqual(headers["x-empty"], "")
        XCTAssertNil(headers["expect"])
    }

    func testManyConcurrentRequestsShareAtMostTwoConnections() async throws {
        let url = fake.baseURL + "/v1/projects/p/messages:send"
        let http = self.http!
        let ports = try await withThrowingTaskGroup(of: (Int, HTTPVersion).self) { group in
            for index in 0..<200 {
                group.addTask {
                    let response = try await http.send(HTTPRequest(
                        method: .post, url: url, body: Array(#"{"i":\#(index)}"#.utf8)))
                    XCTAssertEqual(response.status, 401)
                    return (response.localPort, response.version)
                }
            }
            return try await group.reduce(into: [(Int, HTTPVersion)]()) { $0.append($1) }
        }
        XCTAssertEqual(ports.count, 200)
        XCTAssertTrue(ports.allSatisfy { $0.1 == .http2 })
        XCTAssertLessThanOrEqual(Set(ports.map(\.0)).count, 2)
        let recorded = try await fake.requests(http)
        XCTAssertEqual(recorded["send_count"] as? Int, 200)
        XCTAssertLessThanOrEqual(recorded["connections"] as? Int ?? 99, 2)
    }

    func testTimeoutIsATypedError() async throws {
        try await fake.inject(http, ["delay_ms": 3000])
        let started = ContinuousClock.now
        do {
            _ = try await http.send(HTTPRequest(
                method: .post, url: fake.baseURL + "/v1/projects/p/messages:send", body: [], timeout: .milliseconds(300)))
            XCTFail("expected a timeout")
        } catch let error as HTTPClientError {
            XCTAssertTrue(error.isTimeout, "\(error)")
            XCTAssertEqual(error.code, .transport)
            XCTAssertEqual(error.curlCode, 28)
            XCTAssertTrue(error.isRetriable)
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(2))
        try await fake.inject(http, ["delay_ms": 0])
    }

    func testConnectionRefused() async throws {
        let port = try unusedPort()
        do {
            _ = try await http.send(HTTPRequest(url: "http://127.0.0.1:\(port)/", timeout: .seconds(5)))
            XCTFail("expected a connection error")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error.curlCode, 7, "\(error)")  // CURLE_COULDNT_CONNECT
            XCTAssertFalse(error.isTimeout)
            XCTAssertTrue(error.isRetriable)
        }
    }

    func testInvalidRequestsAreRejected() async throws {
        do {
            _ = try await http.send(HTTPRequest(url: "ftp://127.0.0.1/x"))
            XCTFail("expected an error")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error.code, .invalidRequest)
        }
        do {
            _ = try await http.send(HTTPRequest(url: fake.baseURL + "/", headers: [("X", "a\r\nInjected: 1")]))
            XCTFail("expected an error")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error.code, .invalidRequest)
        }
    }

    func testCancellationAbortsTheTransfer() async throws {
        try await fake.inject(http, ["delay_ms": 3000])
        let http = self.http!
        let url = fake.baseURL + "/v1/projects/p/messages:send"
        let started = ContinuousClock.now
        let task = Task { try await http.send(HTTPRequest(method: .post, url: url, body: [])) }
        try await Task.sleep(for: .milliseconds(200))
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("expected cancellation")
        } catch {
            XCTAssertTrue(error is CancellationError, "\(error)")
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(2))
        try await fake.inject(http, ["delay_ms": 0])
    }

    func testQueueBoundFailsFastWhenFull() async throws {
        try await fake.inject(http, ["delay_ms": 1000])
        let small = try HTTPClient(
            configuration: HTTPClientConfiguration(maxConcurrentRequests: 1, maxQueuedRequests: 1),
            logger: testLogger("test.small"))
        let url = fake.baseURL + "/v1/projects/p/messages:send"
        let first = Task { try await small.send(HTTPRequest(method: .post, url: url, body: [])) }
        try await Task.sleep(for: .milliseconds(200))  // taken by the thread: in flight
        let second = Task { try await small.send(HTTPRequest(method: .post, url: url, body: [])) }
        try await Task.sleep(for: .milliseconds(100))  // waits in the queue
        do {
            _ = try await small.send(HTTPRequest(method: .post, url: url, body: []))
            XCTFail("expected overloaded")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error.code, .overloaded)
        }
        let firstStatus = try await first.value.status
        let secondStatus = try await second.value.status
        XCTAssertEqual(firstStatus, 401)
        XCTAssertEqual(secondStatus, 401)
        await small.shutdown()
        try await fake.inject(http, ["delay_ms": 0])
    }

    func testShutdownFailsPendingRequestsAndLaterOnes() async throws {
        try await fake.inject(http, ["delay_ms": 3000])
        let doomed = try HTTPClient(logger: testLogger("test.doomed"))
        let url = fake.baseURL + "/v1/projects/p/messages:send"
        let tasks = (0..<5).map { _ in Task { try await doomed.send(HTTPRequest(method: .post, url: url, body: [])) } }
        try await Task.sleep(for: .milliseconds(200))
        let started = ContinuousClock.now
        await doomed.shutdown()
        for task in tasks {
            do {
                _ = try await task.value
                XCTFail("expected shutdown")
            } catch let error as HTTPClientError {
                XCTAssertEqual(error.code, .shutdown)
            }
        }
        XCTAssertLessThan(ContinuousClock.now - started, .seconds(1))
        do {
            _ = try await doomed.send(HTTPRequest(url: url))
            XCTFail("expected shutdown")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error.code, .shutdown)
            XCTAssertFalse(error.isRetriable)
        }
        await doomed.shutdown()  // idempotent
        try await fake.inject(http, ["delay_ms": 0])
    }

    private func unusedPort() throws -> Int {
        guard let port = LoopbackPort.free() else { throw FakeServerProcess.Failure(description: "bind failed") }
        return port
    }
}
