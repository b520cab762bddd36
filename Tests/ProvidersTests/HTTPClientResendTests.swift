import CurlHTTP
import Foundation
import TestSupport
import XCTest

/// `HTTPClientError.wasNotSent` against libcurl's own resend: when a kept-alive HTTP/1.1 connection dies with no
/// answer, libcurl sends the request again on a new connection, whatever its method. A refusal of that new
/// connection must not read as "never sent" (the server may have acted on the first copy), or a caller that
/// sends such calls elsewhere (the hop between replicas) would apply a write twice, or answer a failure for a
/// write that was made.
final class HTTPClientResendTests: XCTestCase {
    private var http: HTTPClient!

    override func setUp() async throws {
        http = try HTTPClient(logger: testLogger("test.resend"))
    }

    override func tearDown() async throws {
        await http.shutdown()
    }

    /// The vanishing server, once it answered a first request on a kept-alive connection (the client's handle and
    /// connection now reused).
    private func serverAfterOneAnsweredRequest() async throws -> FakeServerProcess {
        let server = try FakeServerProcess(script: "vanishing_http1.py") { ["--record", $0.appendingPathComponent("record").path] }
        var first = HTTPRequest(url: server.baseURL + "/first", timeout: .seconds(10))
        first.http1 = true
        do {
            let answer = try await http.send(first)
            XCTAssertEqual(answer.status, 200)
        } catch {
            server.stop()
            throw error
        }
        return server
    }

    func testARequestReadByAServerThatThenVanishedWasSent() async throws {
        let server = try await serverAfterOneAnsweredRequest()
        defer { server.stop() }

        var write = HTTPRequest(method: .delete, url: server.baseURL + "/apps/a/subscriptions/s", timeout: .seconds(10))
        write.http1 = true
        do {
            _ = try await http.send(write)
            XCTFail("the server answered nothing")
        } catch let error as HTTPClientError {
            // libcurl's resend on a new connection was refused: CURLE_COULDNT_CONNECT, after the request went out.
            XCTAssertEqual(error.curlCode, 7, "\(error)")
            XCTAssertGreaterThan(error.requestBytesSent, 0, "\(error)")
            XCTAssertFalse(error.wasNotSent, "the server read the request: \(error)")
        }
        let record = try String(contentsOf: server.directory.appendingPathComponent("record"), encoding: .utf8)
        XCTAssertEqual(record, "DELETE /apps/a/subscriptions/s HTTP/1.1\n")
    }

    /// A refused connection is "not sent", also on an easy handle whose last transfer wrote a request and failed
    /// (its count of request bytes starts again with each transfer).
    func testARefusedConnectionWasNotSentEvenOnAReusedHandle() async throws {
        let server = try await serverAfterOneAnsweredRequest()
        defer { server.stop() }
        var vanishing = HTTPRequest(method: .delete, url: server.baseURL + "/x", timeout: .seconds(10))
        vanishing.http1 = true
        do {
            _ = try await http.send(vanishing)
            XCTFail("the server answered nothing")
        } catch let error as HTTPClientError {
            XCTAssertGreaterThan(error.requestBytesSent, 0, "\(error)")
        }
        guard let port = LoopbackPort.free() else { throw FakeServerProcess.Failure(description: "bind failed") }
        var refused = HTTPRequest(method: .post, url: "http://127.0.0.1:\(port)/x", body: Array("{}".utf8), timeout: .seconds(5))
        refused.http1 = true
        do {
            _ = try await http.send(refused)
            XCTFail("nobody listens there")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error.curlCode, 7, "\(error)")
            XCTAssertEqual(error.requestBytesSent, 0, "\(error)")
            XCTAssertTrue(error.wasNotSent, "\(error)")
        }
    }
}
