import CurlHTTP
import Foundation
import XCTest

/// A running fake provider from `tests/fakes/` (a Python script located relative to this file), started with
/// `--port 0 --exit-on-stdin-eof` and the caller's arguments, and its control API. The script prints one JSON line
/// once listening (`{"port": N, "base_url": …, …}`): ``announcement``.
final class FakeServerProcess: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let process = Process()
    /// Kept open for the life of the fake, which exits when it closes (`--exit-on-stdin-eof`), so a test process
    /// killed before `stop()` does not leave the server running.
    private let stdin = Pipe()
    /// A directory of the fake's own (certificates, credentials), removed by ``stop()``.
    let directory: URL
    let announcement: [String: Any]
    let port: Int
    let baseURL: String
    /// The CA file of its self-signed certificate (with `--tls-self-signed`).
    var caFile: String? { announcement["ca_file"] as? String }

    /// Starts `tests/fakes/<script>` with `arguments(directory)` and waits (at most `timeout`) for its line.
    init(script: String, timeout: TimeInterval = 30, arguments: (URL) -> [String]) throws {
        // This file is `<root>/Tests/ProvidersTests/FakeServerProcess.swift`.
        let path = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("tests/fakes/\(script)").path
        guard FileManager.default.fileExists(atPath: path) else { throw Failure(description: "fake server not found at \(path)") }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fake-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", path, "--port", "0", "--exit-on-stdin-eof"] + arguments(directory)
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        try process.run()
        guard let text = LineReader(stdout.fileHandleForReading).firstLine(timeout: timeout),
            let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            let port = object["port"] as? Int, let baseURL = object["base_url"] as? String
        else {
            process.terminate()
            throw Failure(description: "\(script) did not start within \(timeout) s")
        }
        announcement = object
        self.port = port
        self.baseURL = baseURL
    }

    /// A string of the announcement, or a failure naming it.
    func announced(_ key: String) throws -> String {
        guard let value = announcement[key] as? String else { throw Failure(description: "no \(key) in \(announcement)") }
        return value
    }

    /// Stops the process (SIGTERM, then SIGKILL after 5 s) and removes its files.
    func stop() {
        if process.isRunning {
            process.terminate()
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning && Date() < deadline { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Calls the control API: `json` as the body (none: empty), 200 expected, the answer's JSON.
    func control(_ client: HTTPClient, _ method: HTTPMethod, _ path: String, _ json: [String: Any]? = nil) async throws -> Any {
        let body = try json.map { try JSONSerialization.data(withJSONObject: $0) }.map { Array($0) } ?? []
        var request = HTTPRequest(
            method: method, url: baseURL + path, headers: [("Content-Type", "application/json")], body: body, timeout: .seconds(10))
        request.caFile = caFile
        let response = try await client.send(request)
        guard response.status == 200 else {
            throw Failure(description: "\(path) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
        return try JSONSerialization.jsonObject(with: Data(response.body))
    }
}
