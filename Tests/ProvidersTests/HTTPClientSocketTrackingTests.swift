import Foundation
import TestSupport
import XCTest

@testable import CurlHTTP

/// The multi handle's record of its connections' sockets (`CurlMultiHandle.sockets`), which the transfer thread
/// corks while `curl_multi_perform` writes: a connection's socket is in it while the connection lives, and leaves
/// it when libcurl closes the connection (no closed descriptor, perhaps reused by another socket, is ever corked).
/// Read once the client's thread has ended (`shutdown`), so never while the thread writes it.
final class HTTPClientSocketTrackingTests: XCTestCase {
    private func trackedSockets(_ http: HTTPClient) -> Int {
        Int(http.shared.multi.sockets.pointee.count)
    }

    private func server(_ arguments: [String] = []) throws -> FakeServerProcess {
        try FakeServerProcess(script: "vanishing_http1.py") { ["--record", $0.appendingPathComponent("record").path] + arguments }
    }

    func testAKeptAliveConnectionsSocketIsTracked() async throws {
        let server = try server(["--keep-listening"])
        defer { server.stop() }
        let http = try HTTPClient(logger: testLogger("test.sockets"))
        var request = HTTPRequest(url: server.baseURL + "/first", timeout: .seconds(10))
        request.http1 = true
        let answer = try await http.send(request)
        XCTAssertEqual(answer.status, 200)
        await http.shutdown()
        XCTAssertEqual(trackedSockets(http), 1, "the kept-alive connection's socket")
    }

    func testClosedConnectionsLeaveTheRecord() async throws {
        // The second request's connection is closed by the server (EOF); libcurl's resend on a new connection is
        // refused, and that socket is closed too.
        let server = try server()
        defer { server.stop() }
        let http = try HTTPClient(logger: testLogger("test.sockets"))
        var first = HTTPRequest(url: server.baseURL + "/first", timeout: .seconds(10))
        first.http1 = true
        let answer = try await http.send(first)
        XCTAssertEqual(answer.status, 200)
        var second = HTTPRequest(url: server.baseURL + "/second", timeout: .seconds(10))
        second.http1 = true
        do {
            _ = try await http.send(second)
            XCTFail("the server answered nothing")
        } catch is HTTPClientError {}
        await http.shutdown()
        XCTAssertEqual(trackedSockets(http), 0, "every connection was closed")
    }
}
