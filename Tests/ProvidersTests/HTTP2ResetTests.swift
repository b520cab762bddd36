import CurlHTTP
import Foundation
import Synchronization
import TestSupport
import XCTest

/// `tests/fakes/h2_resets.py` run as a process: an h2c server that refuses streams, sends GOAWAY or drops
/// connections, and answers 400 to an empty POST body, as FCM does.
final class H2ResetServer: @unchecked Sendable {
    static let scriptPath: String = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("tests/fakes/h2_resets.py").path

    struct Failure: Error, CustomStringConvertible { let description: String }

    let process = Process()
    private let stdin = Pipe()
    let baseURL: String
    /// The server's self-signed certificate (TLS only).
    let caFile: String?
    private let directory: URL

    /// `tls`: TLS with ALPN h2, as the providers; else h2c with prior knowledge.
    init(_ arguments: [String], tls: Bool, timeout: TimeInterval = 20) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("h2-resets-\(UUID().uuidString)")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Self.scriptPath, "--port", "0", "--exit-on-stdin-eof"] + arguments
            + (tls ? ["--tls-self-signed", directory.path] : [])
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        try process.run()
        guard let text = LineReader(stdout.fileHandleForReading).firstLine(timeout: timeout),
              let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let port = object["port"] as? Int
        else {
            process.terminate()
            throw Failure(description: "h2_resets.py did not start (python3 with h2 needed)")
        }
        caFile = object["ca_file"] as? String
        baseURL = (tls ? "https" : "http") + "://127.0.0.1:\(port)"
    }

    /// Ends the server: closing its stdin makes it exit; SIGTERM, then SIGKILL after 5 s, if it does not.
    func stop() {
        try? stdin.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate() }
        let killAt = Date().addingTimeInterval(5)
        while process.isRunning && Date() < killAt { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }

    func stats(_ client: HTTPClient) async throws -> [String: Int] {
        var request = HTTPRequest(url: baseURL + "/stats", timeout: .seconds(10))
        request.caFile = caFile
        let response = try await client.send(request)
        return try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Int] ?? [:]
    }
}

/// The client through the ways an HTTP/2 server sheds load: refused streams, GOAWAY, dropped connections,
/// with many requests in flight on one connection. No request may reach the server without its body (FCM
/// answers 400 `INVALID_ARGUMENT` to an empty one, which the gateway counts as its own fault), and every
/// request ends: answered, or failed with a transport error the caller retries.
final class HTTP2ResetTests: XCTestCase {
    @discardableResult
    private func run(
        _ arguments: [String], tls: Bool, requests: Int = 600, file: StaticString = #filePath, line: UInt = #line
    ) async throws -> [String: Int] {
        let server: H2ResetServer
        do { server = try H2ResetServer(arguments, tls: tls) } catch { throw XCTSkip("\(error)") }
        defer { server.stop() }
        let http = try HTTPClient(logger: testLogger("test.h2resets"))
        let url = server.baseURL + "/v1/projects/p/messages:send"
        let done = Counter()
        let outcomes = await withTaskGroup(of: String.self) { group in
            for index in 0..<requests {
                group.addTask {
                    let body = Array(#"{"message":{"token":"device-\#(index)","data":{"i":"\#(index)"}}}"#.utf8)
                    defer { done.add() }
                    var request = HTTPRequest(
                        method: .post, url: url, headers: [("Content-Type", "application/json")], body: body,
                        timeout: .seconds(10))
                    request.caFile = server.caFile
                    do {
                        let response = try await http.send(request)
                        return "\(response.status)"
                    } catch let error as HTTPClientError {
                        return "error \(error.code) \(error.curlCode.map(String.init) ?? "")"
                    } catch {
                        return "error \(error)"
                    }
                }
            }
            group.addTask {
                // Every request has a 10 s timeout: all must have ended well within 60 s.
                for _ in 0..<60 {
                    if done.value >= requests { return "" }
                    try? await Task.sleep(for: .seconds(1))
                }
                return "unfinished \(requests - done.value)"
            }
            var outcomes: [String: Int] = [:]
            for await outcome in group where !outcome.isEmpty {
                outcomes[outcome, default: 0] += 1
                // Hung requests are ended by the shutdown (it fails what is pending) so the test ends.
                if outcome.hasPrefix("unfinished") { await http.shutdown() }
            }
            return outcomes
        }
        if outcomes.keys.contains(where: { $0.hasPrefix("unfinished") }) {
            XCTFail("requests never ended: \(outcomes)", file: file, line: line)
            await http.shutdown()
            return outcomes
        }
        await http.shutdown()
        // A client of its own: the server may drop the test's connection at any stream.
        let statsClient = try HTTPClient(logger: testLogger("test.h2resets.stats"))
        let stats = try await server.stats(statsClient)
        await statsClient.shutdown()
        print("h2 resets \(tls ? "TLS" : "h2c") \(arguments): client outcomes \(outcomes), server \(stats)")
        XCTAssertEqual(stats["empty_bodies"], 0, "requests reached the server without their body", file: file, line: line)
        XCTAssertEqual(stats["short_bodies"], 0, "requests reached the server with part of their body", file: file, line: line)
        XCTAssertNil(outcomes["400"], file: file, line: line)
        XCTAssertEqual(outcomes.values.reduce(0, +), requests, "\(outcomes)", file: file, line: line)
        return outcomes
    }

    private static let refused = ["--refuse-every", "3"]
    private static let goaway = ["--goaway-after", "7"]
    private static let dropped = ["--drop-after", "25"]
    private static let together = ["--refuse-every", "5", "--goaway-after", "40", "--drop-after", "90"]

    // Over TLS (as to FCM and HMS): ALPN h2 on every connection, so libcurl's own retries of refused streams
    // and of streams a GOAWAY did not process go out on a new HTTP/2 connection with their body.

    func testRefusedStreamsOverTLSAreSentAgainWithTheirBody() async throws {
        let outcomes = try await run(Self.refused, tls: true)
        // A third of the streams are refused; libcurl sends a refused stream again on a new connection, where
        // it may be refused again (then it fails, and the delivery service retries it).
        XCTAssertGreaterThanOrEqual(outcomes["200"] ?? 0, 570, "a refused stream is safe to send again (RFC 9113 §8.7): \(outcomes)")
    }

    func testGoawayOverTLSNeverSendsAnEmptyBody() async throws {
        try await run(Self.goaway, tls: true)
    }

    func testDroppedConnectionsOverTLSNeverSendAnEmptyBody() async throws {
        try await run(Self.dropped, tls: true)
    }

    func testAllTogetherOverTLSNeverSendAnEmptyBody() async throws {
        try await run(Self.together, tls: true, requests: 1500)
    }

    // Over h2c (the fakes in tests, `load-test.py` without `--tls`), through the CleartextHTTP2Gate.

    func testRefusedStreamsOverH2CNeverSendAnEmptyBody() async throws {
        try await run(Self.refused, tls: false)
    }

    func testGoawayOverH2CNeverSendsAnEmptyBody() async throws {
        try await run(Self.goaway, tls: false)
    }

    func testDroppedConnectionsOverH2CNeverSendAnEmptyBody() async throws {
        try await run(Self.dropped, tls: false)
    }

    func testAllTogetherOverH2CNeverSendAnEmptyBody() async throws {
        try await run(Self.together, tls: false, requests: 1500)
    }
}

private final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
