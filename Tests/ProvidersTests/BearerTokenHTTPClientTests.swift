import CurlHTTP
import Foundation
import Synchronization
import XCTest

@testable import Providers

/// The bearer-token send path FCM and HMS share, against the fake FCM server: which tokens it uses, when it
/// refreshes, what it reports.
final class BearerTokenHTTPClientTests: FakeServerTestCase<FakeFCMProcess> {
    /// A token cache whose fetches return, in turn, `tokens` (a nil: a real token from the fake's endpoint).
    private func tokenCache(_ tokens: [String?]) throws -> OAuthTokenCache<FCMError> {
        let real = try FCMAccessTokenManager(
            serviceAccount: try FCMServiceAccount(contentsOfFile: fake.serviceAccountPath), httpClient: http,
            logger: testLogger("test.token"))
        let fetches = Mutex(0)
        let cache = OAuthTokenCache<FCMError>(
            refreshMargin: .seconds(300), failureBackoff: .zero, now: WallClock.now,
            fetch: { () async throws(FCMError) -> OAuthAccessToken in
                let index = fetches.withLock { count in defer { count += 1 }; return count }
                let value: String
                if let fixed = tokens[min(index, tokens.count - 1)] { value = fixed } else { value = try await real.accessToken() }
                return OAuthAccessToken(value: value, obtainedAt: WallClock.now(), expiresAt: WallClock.now() + 3600)
            })
        return cache
    }

    private func client(_ tokens: OAuthTokenCache<FCMError>, url: String? = nil) -> BearerTokenHTTPClient<FCMError> {
        BearerTokenHTTPClient(
            http: http, url: url ?? fake.baseURL + "/v1/projects/fake-project/messages:send", timeout: .seconds(5),
            tokens: tokens, provider: "FCM", logger: testLogger("test.bearer"))
    }

    /// FCM's reading: 200 sent, 401 a refused token, anything else a failure.
    private static func answer(_ response: HTTPResponse) -> BearerTokenHTTPClient<FCMError>.Answer<Int> {
        switch response.status {
        case 200: .sent(200)
        case 401: .tokenRefused(FCMResponseParser.error(from: response), metadata: [:])
        default: .failed(FCMResponseParser.error(from: response))
        }
    }

    private let body = FCMMessageEncoder.encodeMessage(token: "device", data: [("k", "v")])

    struct UnexpectedSuccess: Error {}

    /// The failure of a post through `client`; throws when it was sent.
    private func failure(_ client: BearerTokenHTTPClient<FCMError>) async throws -> FCMError {
        do {
            _ = try await client.post(body, read: Self.answer)
        } catch {
            return error
        }
        throw UnexpectedSuccess()
    }

    private func sends() async throws -> [[String: Any]] {
        try await fake.requests(http)["sends"] as? [[String: Any]] ?? []
    }

    func testARefusedTokenIsRefreshedOnceAndTheRequestRepeated() async throws {
        let tokens = try tokenCache(["revoked-token", nil])
        let status = try await client(tokens).post(body, read: Self.answer)
        XCTAssertEqual(status, 200)
        let fetches = await tokens.fetchCount
        XCTAssertEqual(fetches, 2)
        let recorded = try await sends()
        XCTAssertEqual(recorded.compactMap { $0["status"] as? Int }, [401, 200])
        let headers = recorded.compactMap { ($0["headers"] as? [String: String])?["authorization"] }
        XCTAssertEqual(headers.first, "Bearer revoked-token")
        XCTAssertTrue(headers.last?.hasPrefix("Bearer ya29.fake-") ?? false, "\(headers)")
        XCTAssertEqual(recorded.last?["body"] as? String, String(decoding: body, as: UTF8.self))
    }

    func testASecondRefusalIsReportedWithoutAThirdAttempt() async throws {
        let tokens = try tokenCache(["revoked-1", "revoked-2", nil])
        let error = try await failure(client(tokens))
        XCTAssertEqual(error.httpStatus, 401)
        XCTAssertEqual(error.source, .fcm)
        let fetches = await tokens.fetchCount
        XCTAssertEqual(fetches, 2)
        let statuses = try await sends().compactMap { $0["status"] as? Int }
        XCTAssertEqual(statuses, [401, 401])
    }

    func testAFailureIsNotRetried() async throws {
        let tokens = try tokenCache([nil])
        try await fake.inject(http, ["error": "UNAVAILABLE"])
        let error = try await failure(client(tokens))
        XCTAssertEqual(error.code, .unavailable)
        let fetches = await tokens.fetchCount
        XCTAssertEqual(fetches, 1)
        let sendCount = try await sends().count
        XCTAssertEqual(sendCount, 1)
    }

    func testNoTokenMeansNoRequest() async throws {
        let tokens = OAuthTokenCache<FCMError>(
            refreshMargin: .seconds(300), failureBackoff: .zero, now: WallClock.now,
            fetch: { () async throws(FCMError) -> OAuthAccessToken in
                throw FCMError(source: .authentication, httpStatus: 400, status: "invalid_grant", message: "no")
            })
        let error = try await failure(client(tokens))
        XCTAssertEqual(error.source, .authentication)
        XCTAssertEqual(error.status, "invalid_grant")
        let sendCount = try await sends().count
        XCTAssertEqual(sendCount, 0)
    }

    func testNoAnswerIsATransportFailure() async throws {
        let tokens = try tokenCache(["any"])
        let error = try await failure(client(tokens, url: "http://127.0.0.1:9/send"))
        XCTAssertEqual(error.source, .transport)
        XCTAssertNotNil(error.transportError)
        XCTAssertEqual(error.classification, .retryable)
    }
}
