import CurlHTTP
import Foundation
import Providers

/// A running `tests/fakes/fake_hms.py` (``FakeServerProcess``) with one registered app, optionally over TLS, and its
/// control API.
final class FakeHMSProcess: @unchecked Sendable {
    let server: FakeServerProcess
    let tokenURL: String
    let credentials: HMSCredentials

    var port: Int { server.port }
    var baseURL: String { server.baseURL }
    var caFile: String? { server.caFile }

    /// Starts the fake and waits (at most `timeout`) for its `{"port": N, ...}` line.
    init(tls: Bool = false, timeout: TimeInterval = 30) throws {
        server = try FakeServerProcess(script: "fake_hms.py", timeout: timeout) { directory in
            tls ? ["--tls-self-signed", directory.path] : []
        }
        do {
            tokenURL = try server.announced("token_url")
            credentials = HMSCredentials(
                appId: try server.announced("app_id"), clientId: try server.announced("client_id"),
                clientSecret: try server.announced("client_secret"))
        } catch {
            server.stop()
            throw error
        }
    }

    /// Stops the process (SIGTERM, then SIGKILL after 5 s) and removes its files.
    func stop() { server.stop() }

    // MARK: control API

    func control(_ client: HTTPClient, _ path: String, _ json: [String: Any] = [:]) async throws -> Any {
        try await server.control(client, .post, path, json)
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
