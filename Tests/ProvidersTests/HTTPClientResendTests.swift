import CurlHTTP
import Foundation
import TestSupport
import XCTest

/// `HTTPClientError.wasNotSent` against libcurl's own resend: when a kept-alive HTTP/1.1 connection dies with no
/// answer, libcurl sends the request again on a new connection, whatever its method. A refusal of that new
/// connection must not read as "never sent" (the server may have acted on the first copy), or a caller that
/// sends such calls elsewhere (the hop between replicas) would apply a write twice, or answer a failure for a
/// write that was made. A request sent at most once (`HTTPRequest.sendOnce`, the hop's writes) is never sent again
/// by libcurl, and its failure says when the server certainly never read it (`HTTPClientError.wasNotRead`).
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
    private func serverAfterOneAnsweredRequest(_ arguments: [String] = []) async throws -> FakeServerProcess {
        let server = try FakeServerProcess(script: "vanishing_http1.py") {
            ["--record", $0.appendingPathComponent("record").path] + arguments
        }
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

    private func recorded(_ server: FakeServerProcess) -> String {
        (try? String(contentsOf: server.directory.appendingPathComponent("record"), encoding: .utf8)) ?? ""
    }

    private func delete(_ server: FakeServerProcess, sendOnce: Bool) -> HTTPRequest {
        var write = HTTPRequest(method: .delete, url: server.baseURL + "/apps/a/subscriptions/s", timeout: .seconds(10))
        write.http1 = true
        write.sendOnce = sendOnce
        return write
    }

    /// What libcurl does by default, and why the hop's writes are sent once: the server read the request and closed
    /// the connection without answering, but still listens; libcurl sends the request again, and the server acts
    /// on it twice.
    func testLibcurlSendsAWriteAgainOnItsOwnUnlessItIsSentOnce() async throws {
        let server = try await serverAfterOneAnsweredRequest(["--keep-listening"])
        defer { server.stop() }
        let answer = try await http.send(delete(server, sendOnce: false))
        XCTAssertEqual(answer.status, 200)
        XCTAssertEqual(recorded(server), String(repeating: "DELETE /apps/a/subscriptions/s HTTP/1.1\n", count: 2))
    }

    func testASendOnceRequestReadAndLeftUnansweredIsNeitherSentAgainNorNotRead() async throws {
        let server = try await serverAfterOneAnsweredRequest(["--keep-listening"])
        defer { server.stop() }
        do {
            _ = try await http.send(delete(server, sendOnce: true))
            XCTFail("the server answered nothing on the request's one connection")
        } catch let error as HTTPClientError {
            // libcurl's resend was stopped by the send-once callbacks (CURLE_ABORTED_BY_CALLBACK).
            XCTAssertEqual(error.curlCode, 42, "\(error)")
            XCTAssertGreaterThan(error.requestBytesSent, 0, "\(error)")
            XCTAssertFalse(error.wasNotSent, "\(error)")
            XCTAssertFalse(error.wasNotRead, "the server read the request: \(error)")
        }
        XCTAssertEqual(recorded(server), "DELETE /apps/a/subscriptions/s HTTP/1.1\n", "sent once")
        // The handle and the client go on: the next request is answered.
        let next = try await http.send(delete(server, sendOnce: true))
        XCTAssertEqual(next.status, 200)
    }

    /// The stopping replica of the failed CI run: it closed the kept-alive connection with the forwarded write
    /// unread (the kernel reset the connection), then its listening socket.
    func testASendOnceRequestResetUnreadWasNotRead() async throws {
        let server = try await serverAfterOneAnsweredRequest(["--second", "reset"])
        defer { server.stop() }
        do {
            _ = try await http.send(delete(server, sendOnce: true))
            XCTFail("the server reset the connection")
        } catch let error as HTTPClientError {
            XCTAssertGreaterThan(error.requestBytesSent, 0, "\(error)")
            XCTAssertTrue(error.wasNotRead, "\(error)")
        }
        XCTAssertEqual(recorded(server), "")
    }

    /// The same reset while the server still listens: libcurl's resend is stopped before it connects (the request
    /// goes out once), and the failure still says the server never read it.
    func testASendOnceRequestResetUnreadIsNotSentAgainWhileTheServerListens() async throws {
        let server = try await serverAfterOneAnsweredRequest(["--second", "reset", "--keep-listening"])
        defer { server.stop() }
        do {
            _ = try await http.send(delete(server, sendOnce: true))
            XCTFail("the server reset the connection")
        } catch let error as HTTPClientError {
            XCTAssertTrue(error.wasNotRead, "\(error)")
        }
        XCTAssertEqual(recorded(server), "", "libcurl did not send the request again")
        let unsafe = try await http.send(delete(server, sendOnce: false))
        XCTAssertEqual(unsafe.status, 200, "a request not sent once is still sent on a new connection")
    }
}
