import CurlHTTP
import Foundation
import Providers
import XCTest

/// A running `tests/fakes/fake_hms.py` (located relative to this file) with one registered app, optionally
/// over TLS, and its control API.
final class FakeHMSProcess: @unchecked Sendable {
    /// `<package root>/tests/fakes/fake_hms.py`; this file is `<root>/Tests/ProvidersTests/FakeHMSProcess.swift`.
    static let scriptPath: String = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("tests/fakes/fake_hms.py").path

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let process = Process()
    /// Kept open for the life of the fake, which exits when it closes (`--exit-on-stdin-eof`).
    private let stdin = Pipe()
    let directory: URL
    let port: Int
    let baseURL: String
    let tokenURL: String
    let credentials: HMSCredentials
    let caFile: String?

    /// Starts the fake and waits (at most `timeout`) for its `{"port": N, ...}` line.
    init(tls: Bool = false, timeout: TimeInterval = 30) throws {
        guard FileManager.default.fileExists(atPath: Self.scriptPath) else {
            throw Failure(description: "fake HMS server not found at \(Self.scriptPath)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fake-hms-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var arguments = ["python3", Self.scriptPath, "--port", "0", "--exit-on-stdin-eof"]
        if tls { arguments += ["--tls-self-signed", directory.path] }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        try process.run()

        let reader = LineReader(stdout.fileHandleForReading)
        guard let text = reader.firstLine(timeout: timeout),
              let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
              let port = object["port"] as? Int, let baseURL = object["base_url"] as? String,
              let tokenURL = object["token_url"] as? String, let appId = object["app_id"] as? String,
              let clientId = object["client_id"] as? String, let clientSecret = object["client_secret"] as? String
        else {
            process.terminate()
            throw Failure(description: "fake HMS server did not start within \(timeout) s")
        }
        self.port = port
        self.baseURL = baseURL
        self.tokenURL = tokenURL
        self.credentials = HMSCredentials(appId: appId, clientId: clientId, clientSecret: clientSecret)
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

    func control(_ client: HTTPClient, _ path: String, _ json: [String: Any] = [:]) async throws -> Any {
        let body = Array(try JSONSerialization.data(withJSONObject: json))
        let response = try await client.send(HTTPRequest(
            method: .post, url: baseURL + path, headers: [("Content-Type", "application/json")], body: body,
            timeout: .seconds(10)))
        guard response.status == 200 else {
            throw Failure(description: "\(path) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))")
        }
        return try JSONSerialization.jsonObject(with: Data(response.body))
    }

    func reset(_ client: HTTPClient) async throws {
        _ = try await control(client, "/_control/reset")
    }

    func inject(_ client: HTTPClient, _ spec: [String: Any]) async throws {
        _ = try await control(client, "/_control/inject", spec)
    }

    func expireTokens(_ client: HTTPClient) async throws {
        _ = try await control(client, "/_control/expire_tokens")
    }

    /// `{"sends": [...], "send_count", "token_requests": [...], "issued_tokens", "connections"}`.
    func snapshot(_ client: HTTPClient) async throws -> [String: Any] {
        try await control(client, "/_control/sends") as? [String: Any] ?? [:]
    }
}
