import CurlHTTP
import Foundation
import Logging
import XCTest

/// A running `tests/fakes/fake_fcm.py` (located relative to this file), started with a fresh service
/// account and optionally TLS, and its control API.
final class FakeFCMProcess: @unchecked Sendable {
    /// `<package root>/tests/fakes/fake_fcm.py`; this file is `<root>/Tests/ProvidersTests/FakeFCMProcess.swift`.
    static let scriptPath: String = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("tests/fakes/fake_fcm.py").path

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let process = Process()
    /// Kept open for the life of the fake, which exits when it closes (`--exit-on-stdin-eof`), so a test
    /// process killed before `stop()` does not leave the server running.
    private let stdin = Pipe()
    let directory: URL
    let port: Int
    let baseURL: String
    let serviceAccountPath: String
    let caFile: String?

    /// Starts the fake and waits (at most `timeout`) for its `{"port": N, ...}` line.
    init(tls: Bool = false, timeout: TimeInterval = 30) throws {
        guard FileManager.default.fileExists(atPath: Self.scriptPath) else {
            throw Failure(description: "fake server not found at \(Self.scriptPath)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fake-fcm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var arguments = [
            "python3", Self.scriptPath, "--port", "0",
            "--service-account-out", directory.appendingPathComponent("service-account.json").path,
            "--exit-on-stdin-eof",
        ]
        if tls { arguments += ["--tls-self-signed", directory.path] }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        try process.run()

        let line = LineReader(stdout.fileHandleForReading)
        guard let text = line.firstLine(timeout: timeout),
              let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let port = object["port"] as? Int, let baseURL = object["base_url"] as? String,
              let serviceAccount = object["service_account"] as? String
        else {
            process.terminate()
            throw Failure(description: "fake FCM server did not start within \(timeout) s")
        }
        self.port = port
        self.baseURL = baseURL
        self.serviceAccountPath = serviceAccount
        self.caFile = object["ca_file"] as? String
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

    // MARK: control API

    func control(_ client: HTTPClient, _ method: HTTPMethod, _ path: String, _ json: [String: Any]? = nil) async throws -> Any {
        let body = try json.map { try JSONSerialization.data(withJSONObject: $0) }.map { Array($0) } ?? []
        let response = try await client.send(HTTPRequest(
            method: method, url: baseURL + path, headers: [("Content-Type", "application/json")], body: body,
            timeout: .seconds(10)))
        guard response.status == 200 else {
            throw Failure(description: "\(path) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
        return try JSONSerialization.jsonObject(with: Data(response.body))
    }

    func reset(_ client: HTTPClient) async throws {
        _ = try await control(client, .post, "/_fake/reset", [:])
    }

    func inject(_ client: HTTPClient, _ spec: [String: Any]) async throws {
        _ = try await control(client, .post, "/_fake/inject", spec)
    }

    func requests(_ client: HTTPClient) async throws -> [String: Any] {
        try await control(client, .get, "/_fake/requests") as? [String: Any] ?? [:]
    }
}
