import CurlHTTP
import Foundation

/// A running `tests/fakes/fake_fcm.py` (``FakeServerProcess``), started with a fresh service account and optionally
/// TLS, and its control API.
final class FakeFCMProcess: @unchecked Sendable {
    let server: FakeServerProcess
    let serviceAccountPath: String

    var port: Int { server.port }
    var baseURL: String { server.baseURL }
    var caFile: String? { server.caFile }

    /// Starts the fake and waits (at most `timeout`) for its `{"port": N, ...}` line.
    init(tls: Bool = false, timeout: TimeInterval = 30) throws {
        server = try FakeServerProcess(script: "fake_fcm.py", timeout: timeout) { directory in
            ["--service-account-out", directory.appendingPathComponent("service-account.json").path]
                + (tls ? ["--tls-self-signed", directory.path] : [])
        }
        do {
            serviceAccountPath = try server.announced("service_account")
        } catch {
            server.stop()
            throw error
        }
    }

    /// Stops the process (SIGTERM, then SIGKILL after 5 s) and removes its files.
    func stop() { server.stop() }

    // MARK: control API

    func control(_ client: HTTPClient, _ method: HTTPMethod, _ path: String, _ json: [String: Any]? = nil) async throws -> Any {
        try await server.control(client, method, path, json)
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
