import CurlHTTP
import Foundation
import Logging
import PushCore
import SSLCrypto
import Synchronization
import XCTest

@testable import Providers

/// ``APNsClient`` against `tests/fakes/fake_apns.py` (HTTP/2 over TLS, the provider token verified with the team's
/// public key): a push accepted, Apple's answers classified, and the provider token renewed after a refusal only
/// when Apple would accept a new one (20 minutes after the last), with a clock the test moves.
final class APNsClientTests: XCTestCase {
    private static let team = "TEAM123456"
    private static let keyID = "KEY1234567"
    private static let bundle = "com.example.app"
    private static let device = String(repeating: "ab", count: 32)

    /// The fake with this team's key (written to its directory as `AuthKey.p8`) and bundle id.
    private static func startFake() throws -> FakeServerProcess {
        do {
            return try FakeServerProcess(script: "fake_apns.py") { directory in
                [
                    "--tls-self-signed", directory.path, "--team", team, "--key-id", keyID, "--bundle-id", bundle,
                    "--p8-out", directory.appendingPathComponent("AuthKey.p8").path,
                ]
            }
        } catch {
            throw XCTSkip("fake APNs unavailable: \(error)")
        }
    }

    func testAProviderTokenRefusedIsRenewedOnlyOnceAppleAllowsANewOne() async throws {
        let fake = try Self.startFake()
        defer { fake.stop() }
        let http = try HTTPClient(configuration: HTTPClientConfiguration(), logger: Logger(label: "test"))
        // Forty minutes ago: every token stays within Apple's hour, never in the future.
        let clock = Mutex<Double>(Date().timeIntervalSince1970.rounded(.down) - 40 * 60)
        let key = try ECPrivateKey(pem: String(contentsOfFile: try fake.announced("p8"), encoding: .utf8))
        let token = APNsProviderToken(teamID: Self.team, keyID: Self.keyID, key: key, clock: { clock.withLock { $0 } })
        let client = APNsClient(
            http: http, providerToken: token, bundleID: Self.bundle, environment: .production,
            configuration: APNsConfiguration(baseURL: fake.baseURL, developmentBaseURL: fake.baseURL, caFile: fake.caFile),
            logger: Logger(label: "test"), clock: { clock.withLock { $0 } })
        func script(_ reason: String) async throws {
            _ = try await fake.control(
                http, .post, "/_fake/script", ["token": Self.device, "answers": [["status": 403, "reason": reason]]])
        }
        func jwts() async throws -> [String] {
            let requests = try await fake.control(http, .get, "/_fake/requests") as? [String: Any]
            let records = requests?["requests"] as? [[String: Any]] ?? []
            return records.compactMap { ($0["jwt"] as? [String: Any])?["raw"] as? String }
        }
        func send() async -> DeliveryOutcome {
            await client.send(deviceToken: Self.device, data: Array(#"{"t":"noData","app":"a","sp":"/x"}"#.utf8))
        }

        var outcome = await send()
        XCTAssertEqual(outcome, .sent)
        try await script("ExpiredProviderToken")
        outcome = await send()
        guard case .failed(let refused) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertEqual(refused.classification, .ourFault)
        XCTAssertEqual(refused.reason, "ExpiredProviderToken")
        outcome = await send()
        XCTAssertEqual(outcome, .sent)
        var seen = try await jwts()
        XCTAssertEqual(seen.count, 3)
        XCTAssertEqual(Set(seen).count, 1, "a token under 20 minutes old is kept: Apple would refuse a new one")

        clock.withLock { $0 += 21 * 60 }
        try await script("InvalidProviderToken")
        outcome = await send()
        guard case .failed(let again) = outcome else { return XCTFail("\(outcome)") }
        XCTAssertEqual(again.reason, "InvalidProviderToken")
        outcome = await send()
        XCTAssertEqual(outcome, .sent)
        seen = try await jwts()
        XCTAssertEqual(seen.count, 5)
        XCTAssertEqual(seen[3], seen[0], "refused, then dropped")
        XCTAssertNotEqual(seen[4], seen[0], "the retry signs a new token")
        await http.shutdown()
    }

    func testApplesAnswersAreClassified() async throws {
        let fake = try Self.startFake()
        defer { fake.stop() }
        let http = try HTTPClient(configuration: HTTPClientConfiguration(), logger: Logger(label: "test"))
        let key = try ECPrivateKey(pem: String(contentsOfFile: try fake.announced("p8"), encoding: .utf8))
        let client = APNsClient(
            http: http, providerToken: APNsProviderToken(teamID: Self.team, keyID: Self.keyID, key: key, clock: { WallClock.now() }),
            bundleID: Self.bundle, environment: .development,
            configuration: APNsConfiguration(baseURL: "https://127.0.0.1:1", developmentBaseURL: fake.baseURL, caFile: fake.caFile),
            logger: Logger(label: "test"))
        let answers: [[String: Any]] = [
            ["status": 410, "reason": "Unregistered", "timestamp": 1_700_000_000_000], ["status": 400, "reason": "BadDeviceToken"],
            ["status": 429, "reason": "TooManyRequests"], ["status": 503, "reason": "ServiceUnavailable"],
            ["status": 413, "reason": "PayloadTooLarge"], ["status": 400, "reason": "TopicDisallowed"],
        ]
        _ = try await fake.control(http, .post, "/_fake/script", ["token": Self.device, "answers": answers])
        var seen: [String] = []
        for _ in answers {
            guard case .failed(let failure) = await client.send(deviceToken: Self.device, data: Array("{}".utf8)) else {
                return XCTFail("sent")
            }
            seen.append("\(failure.reason):\(failure.classification)")
        }
        XCTAssertEqual(
            seen,
            [
                "Unregistered:tokenDead", "BadDeviceToken:tokenDead", "TooManyRequests:retryable", "ServiceUnavailable:retryable",
                "too_big:rejected", "TopicDisallowed:ourFault",
            ])
        let sent = await client.send(deviceToken: Self.device, data: Array("{}".utf8), options: DeliveryOptions(ttlSeconds: 0, collapseKey: "k"))
        XCTAssertEqual(sent, .sent, "the development host")
        await http.shutdown()
    }
}
