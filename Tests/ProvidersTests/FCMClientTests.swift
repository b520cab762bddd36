import CurlHTTP
import Foundation
import Providers
import XCTest

/// FCMClient + CurlHTTP against the fake FCM server (h2c), error injection included.
final class FCMClientTests: FakeServerTestCase<FakeFCMProcess> {
    private var account: FCMServiceAccount!

    override func setUp() async throws {
        try await super.setUp()
        account = try FCMServiceAccount(contentsOfFile: fake.serviceAccountPath)
    }

    private func makeClient(_ configuration: FCMConfiguration? = nil) throws -> FCMClient {
        try FCMClient(
            serviceAccount: account, httpClient: http,
            configuration: configuration ?? FCMConfiguration(baseURL: fake.baseURL), logger: testLogger("test.fcm"))
    }

    private func sends() async throws -> [[String: Any]] {
        try await fake.requests(http)["sends"] as? [[String: Any]] ?? []
    }

    private func tokenRequestCount() async throws -> Int {
        (try await fake.requests(http)["token_requests"] as? [[String: Any]])?.count ?? -1
    }

    struct UnexpectedSuccess: Error {
        let messageName: String
    }

    /// The error of a failed send; throws when it was sent.
    private func failure(_ result: FCMSendResult) throws -> FCMError {
        switch result {
        case .sent(let message): throw UnexpectedSuccess(messageName: message.name)
        case .failed(let error): return error
        }
    }

    func testSendPostsTheExactMessageOverHTTP2() async throws {
        let client = try makeClient()
        let data: [(key: String, value: String)] = [("t", "value"), ("app", "toto"), ("d", #"{"a":"é/😀\n"}"#)]
        let result = await client.send(token: "device-token-1", data: data)
        guard case .sent(let accepted) = result else { return XCTFail("\(result)") }
        XCTAssertTrue(accepted.name.hasPrefix("projects/fake-project/messages/"), accepted.name)

        let recordedSends = try await sends()
        let send = try XCTUnwrap(recordedSends.first)
        XCTAssertEqual(send["http_version"] as? String, "2")
        XCTAssertEqual(send["path"] as? String, "/v1/projects/fake-project/messages:send")
        XCTAssertEqual(send["status"] as? Int, 200)
        XCTAssertEqual(
            send["body"] as? String,
            String(decoding: FCMMessageEncoder.encodeMessage(token: "device-token-1", data: data), as: UTF8.self))
        let headers = try XCTUnwrap(send["headers"] as? [String: String])
        XCTAssertTrue(headers["authorization"]?.hasPrefix("Bearer ya29.fake-") ?? false)
        XCTAssertEqual(headers["content-type"], "application/json")
        let message = try XCTUnwrap((send["json"] as? [String: Any])?["message"] as? [String: Any])
        XCTAssertEqual((message["data"] as? [String: String])?["d"], #"{"a":"é/😀\n"}"#)
        XCTAssertEqual((message["android"] as? [String: String])?["priority"], "high")
    }

    func testTwoHundredConcurrentSendsReuseOneTokenOverAtMostTwoConnections() async throws {
        let client = try makeClient()
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<200 {
                group.addTask {
                    if case .sent = await client.send(token: "tok-\(index)", data: [("i", "\(index)")]) { return true }
                    return false
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        XCTAssertEqual(results.filter { $0 }.count, 200)
        let recorded = try await fake.requests(http)
        XCTAssertEqual(recorded["send_count"] as? Int, 200)
        XCTAssertLessThanOrEqual(recorded["connections"] as? Int ?? 99, 2)
        XCTAssertEqual((recorded["token_requests"] as? [Any])?.count, 1)
        let fetches = await client.tokenManager.fetchCount
        XCTAssertEqual(fetches, 1)
        // And later sends keep using the cached token.
        _ = await client.send(token: "again", data: [])
        let tokenRequests = try await tokenRequestCount()
        XCTAssertEqual(tokenRequests, 1)
    }

    func testRevokedAccessTokenIsRefreshedOnceOn401() async throws {
        let client = try makeClient()
        guard case .sent = await client.send(token: "a", data: []) else { return XCTFail("first send failed") }
        try await fake.inject(http, ["revoke_access_tokens": true])
        let result = await client.send(token: "b", data: [])
        guard case .sent = result else { return XCTFail("\(result)") }
        let statuses = try await sends().compactMap { $0["status"] as? Int }
        XCTAssertEqual(statuses, [200, 401, 200])
        let tokenRequests = try await tokenRequestCount()
        XCTAssertEqual(tokenRequests, 2)
    }

    func testPersistent401IsReportedAfterOneRefresh() async throws {
        let client = try makeClient()
        try await fake.inject(http, ["error": "UNAUTHENTICATED", "count": 2])
        let error = try failure(await client.send(token: "a", data: []))
        XCTAssertEqual(error.httpStatus, 401)
        XCTAssertEqual(error.status, "UNAUTHENTICATED")
        XCTAssertNil(error.code)
        XCTAssertEqual(error.classification, .ourFault)
        let tokenRequests = try await tokenRequestCount()
        XCTAssertEqual(tokenRequests, 2)
    }

    func testInjectedFCMErrorsAreClassified() async throws {
        let client = try makeClient()
        struct Case {
            let spec: [String: Any]
            let code: FCMErrorCode
            let status: Int
            let classification: ProviderClassification
            var retryAfter: Double? = nil
            var minimumDelay: Double? = nil
            var namesToken = false
        }
        let cases: [Case] = [
            Case(spec: ["error": "UNREGISTERED"], code: .unregistered, status: 404, classification: .tokenDead),
            Case(spec: ["error": "INVALID_ARGUMENT"], code: .invalidArgument, status: 400, classification: .tokenDead, namesToken: true),
            Case(spec: ["error": "INVALID_ARGUMENT", "field": "message.data[0].value"], code: .invalidArgument, status: 400, classification: .ourFault),
            Case(spec: ["error": "SENDER_ID_MISMATCH"], code: .senderIDMismatch, status: 403, classification: .tokenDead),
            Case(spec: ["error": "QUOTA_EXCEEDED", "retry_after": 5], code: .quotaExceeded, status: 429, classification: .retryable, retryAfter: 5, minimumDelay: 60),
            Case(spec: ["error": "UNAVAILABLE", "retry_after": 90], code: .unavailable, status: 503, classification: .retryable, retryAfter: 90, minimumDelay: 90),
            Case(spec: ["error": "INTERNAL"], code: .internal, status: 500, classification: .retryable),
            Case(spec: ["error": "UNSPECIFIED_ERROR"], code: .unspecifiedError, status: 500, classification: .retryable),
            Case(spec: ["error": "THIRD_PARTY_AUTH_ERROR"], code: .thirdPartyAuthError, status: 401, classification: .ourFault),
            Case(
                spec: ["http_status": 409, "body": ["error": ["code": 409, "status": "ABORTED", "message": "new", "details": [
                    ["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "BRAND_NEW_ERROR"]]]]],
                code: .unknown("BRAND_NEW_ERROR"), status: 409, classification: .ourFault),
        ]
        for (index, testCase) in cases.enumerated() {
            let token = "device-\(index)"
            var spec = testCase.spec
            spec["token"] = token
            try await fake.inject(http, spec)
            let error = try failure(await client.send(token: token, data: [("k", "v")]))
            XCTAssertEqual(error.source, .fcm, "\(spec)")
            XCTAssertEqual(error.code, testCase.code, "\(spec)")
            XCTAssertEqual(error.httpStatus, testCase.status, "\(spec)")
            XCTAssertEqual(error.classification, testCase.classification, "\(spec)")
            XCTAssertEqual(error.retryAfterSeconds, testCase.retryAfter, "\(spec)")
            XCTAssertEqual(error.minimumRetryDelaySeconds, testCase.minimumDelay ?? testCase.retryAfter, "\(spec)")
            XCTAssertEqual(error.namesToken, testCase.namesToken, "\(spec)")
            XCTAssertFalse(error.message.contains(token))
        }
        // Per-token injections left other tokens alone, and THIRD_PARTY_AUTH_ERROR (401) did not refresh the token.
        guard case .sent = await client.send(token: "healthy", data: []) else { return XCTFail("healthy send failed") }
        let tokenRequests = try await tokenRequestCount()
        XCTAssertEqual(tokenRequests, 1)
    }

    func testFailNextNRequestsGlobally() async throws {
        let client = try makeClient()
        try await fake.inject(http, ["error": "UNAVAILABLE", "count": 3])
        var outcomes: [String] = []
        for index in 0..<5 {
            switch await client.send(token: "t\(index)", data: []) {
            case .sent: outcomes.append("sent")
            case .failed(let error): outcomes.append(error.code?.rawValue ?? "?")
            }
        }
        XCTAssertEqual(outcomes, ["UNAVAILABLE", "UNAVAILABLE", "UNAVAILABLE", "sent", "sent"])
    }

    func testTimeoutIsRetryable() async throws {
        let client = try makeClient(FCMConfiguration(baseURL: fake.baseURL, requestTimeout: .milliseconds(300)))
        _ = await client.send(token: "warm-up", data: [])  // fetch the OAuth token without delay
        try await fake.inject(http, ["delay_ms": 2000])
        let error = try failure(await client.send(token: "slow", data: []))
        try await fake.inject(http, ["delay_ms": 0])
        XCTAssertEqual(error.source, .transport)
        XCTAssertTrue(error.isTimeout)
        XCTAssertEqual(error.classification, .retryable)
    }

    func testTokenEndpointRefusalIsOurFault() async throws {
        let client = try makeClient()
        try await fake.inject(http, ["token_endpoint_error": ["http_status": 400, "error": "invalid_grant", "error_description": "Invalid JWT Signature."]])
        let error = try failure(await client.send(token: "a", data: []))
        XCTAssertEqual(error.source, .authentication)
        XCTAssertEqual(error.status, "invalid_grant")
        XCTAssertEqual(error.httpStatus, 400)
        XCTAssertEqual(error.classification, .ourFault)
        let sendCount = try await sends().count
        XCTAssertEqual(sendCount, 0)
    }

    func testWrongKeyIsRejectedByTheTokenEndpoint() async throws {
        let other = try RSAKeyFactory.pkcs8PEM()
        account = FCMServiceAccount(
            projectID: account.projectID, clientEmail: account.clientEmail, privateKeyPEM: other,
            privateKeyID: account.privateKeyID, tokenURI: account.tokenURI)
        let client = try makeClient()
        let error = try failure(await client.send(token: "a", data: []))
        XCTAssertEqual(error.source, .authentication)
        XCTAssertEqual(error.status, "invalid_grant")
        XCTAssertEqual(error.classification, .ourFault)
    }

    func testTokenEndpointUnreachableIsRetryable() async throws {
        let client = try makeClient(FCMConfiguration(baseURL: fake.baseURL, tokenURL: "http://127.0.0.1:9/token"))
        let error = try failure(await client.send(token: "a", data: []))
        XCTAssertEqual(error.source, .authentication)
        XCTAssertNotNil(error.transportError)
        XCTAssertEqual(error.classification, .retryable)
    }

    func testWrongProjectIsOurFaultNotTokenDead() async throws {
        account = FCMServiceAccount(
            projectID: "someone-else", clientEmail: account.clientEmail, privateKeyPEM: account.privateKeyPEM,
            privateKeyID: account.privateKeyID, tokenURI: account.tokenURI)
        let client = try makeClient()
        let error = try failure(await client.send(token: "a", data: []))
        XCTAssertEqual(error.httpStatus, 403)
        XCTAssertEqual(error.status, "PERMISSION_DENIED")
        XCTAssertEqual(error.classification, .ourFault)
    }
}
