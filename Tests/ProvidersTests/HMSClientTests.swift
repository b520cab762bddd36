import CurlHTTP
import Foundation
import Providers
import XCTest

/// HMSClient + CurlHTTP against the fake HMS server (h2c, and h2 over TLS), error injection included.
final class HMSClientTests: FakeServerTestCase<FakeHMSProcess> {
    private func makeClient(
        _ configuration: HMSConfiguration? = nil, credentials: HMSCredentials? = nil
    ) throws -> HMSClient {
        try HMSClient(
            credentials: credentials ?? fake.credentials, httpClient: http,
            configuration: configuration ?? HMSConfiguration(baseURL: fake.baseURL, tokenURL: fake.tokenURL),
            logger: testLogger("test.hms"))
    }

    private func sends() async throws -> [[String: Any]] {
        try await fake.snapshot(http)["sends"] as? [[String: Any]] ?? []
    }

    private func tokenRequestCount() async throws -> Int {
        (try await fake.snapshot(http)["token_requests"] as? [[String: Any]])?.count ?? -1
    }

    struct UnexpectedSuccess: Error {
        let requestID: String
    }

    /// The error of a failed send; throws when it was sent.
    private func failure(_ result: HMSSendResult) throws -> HMSError {
        switch result {
        case .sent(let requestID): throw UnexpectedSuccess(requestID: requestID)
        case .failed(let error): return error
        }
    }

    private static let payload = Array(#"{"s":"OK","t":"value","app":"toto","sp":"/a/b","d":"{\"a\":\"é/😀\\n\"}"}"#.utf8)

    func testSendPostsTheExactMessageOverHTTP2() async throws {
        let client = try makeClient()
        let result = await client.send(token: "device-token-1", dataJSON: Self.payload)
        guard case .sent(let requestID) = result else { return XCTFail("\(result)") }
        XCTAssertFalse(requestID.isEmpty)

        let recorded = try await sends()
        let send = try XCTUnwrap(recorded.first)
        XCTAssertEqual(send["http_version"] as? String, "2")
        XCTAssertEqual(send["method"] as? String, "POST")
        XCTAssertEqual(send["path"] as? String, "/v1/\(fake.credentials.appId)/messages:send")
        XCTAssertEqual(send["status"] as? Int, 200)
        XCTAssertEqual(send["code"] as? String, "80000000")
        // The body, byte for byte, and `data` as a string holding exactly the payload bytes.
        let body = try XCTUnwrap(send["body"] as? String)
        XCTAssertEqual(
            body,
            #"{"validate_only":false,"message":{"data":"{\"s\":\"OK\",\"t\":\"value\",\"app\":\"toto\",\"sp\":\"/a/b\",\"d\":\"{\\\"a\\\":\\\"é/😀\\\\n\\\"}\"}","android":{"urgency":"HIGH"},"token":["device-token-1"]}}"#)
        XCTAssertEqual(Array(try XCTUnwrap(send["data"] as? String).utf8), Self.payload)
        XCTAssertEqual(send["tokens"] as? [String], ["device-token-1"])
        let document = try XCTUnwrap(send["json"] as? [String: Any])
        XCTAssertEqual(document["validate_only"] as? Bool, false)
        let message = try XCTUnwrap(document["message"] as? [String: Any])
        XCTAssertEqual((message["android"] as? [String: String])?["urgency"], "HIGH")
        XCTAssertEqual(Set(message.keys), ["data", "android", "token"])
        let headers = try XCTUnwrap(send["headers"] as? [String: String])
        XCTAssertTrue(headers["authorization"]?.hasPrefix("Bearer CgB6e3x9") ?? false)
        XCTAssertEqual(headers["content-type"], "application/json")
    }

    func testDataPairsAreSentAsTheirCompactJSON() async throws {
        let client = try makeClient()
        let result = await client.send(token: "pairs", data: [("t", "noData"), ("app", "toto"), ("q", "\"\\")])
        guard case .sent = result else { return XCTFail("\(result)") }
        let recorded = try await sends()
        let data = try XCTUnwrap(recorded.first?["data"] as? String)
        XCTAssertEqual(data, #"{"t":"noData","app":"toto","q":"\"\\"}"#)
    }

    func testTokenIsCachedAndReusedAcrossConcurrentSends() async throws {
        let client = try makeClient()
        let sent = await withTaskGroup(of: Int.self) { group in
            for index in 0..<100 {
                group.addTask {
                    if case .sent = await client.send(token: "tok-\(index)", dataJSON: Array(#"{"i":"\#(index)"}"#.utf8)) {
                        return 1
                    }
                    return 0
                }
            }
            return await group.reduce(0, +)
        }
        XCTAssertEqual(sent, 100)
        _ = await client.send(token: "later", dataJSON: Array("{}".utf8))
        let recorded = try await fake.snapshot(http)
        XCTAssertEqual(recorded["send_count"] as? Int, 101)
        XCTAssertEqual((recorded["token_requests"] as? [Any])?.count, 1)
        XCTAssertLessThanOrEqual(recorded["connections"] as? Int ?? 99, 2)
        let fetches = await client.tokenManager.fetchCount
        XCTAssertEqual(fetches, 1)
    }

    func testResultCodesAreClassified() async throws {
        let client = try makeClient()
        _ = await client.send(token: "warm-up", dataJSON: Array("{}".utf8))
        struct Case {
            let spec: [String: Any]
            let code: HMSResultCode?
            let status: Int
            let classification: ProviderClassification
            var retryAfter: Double? = nil
        }
        let cases: [Case] = [
            Case(spec: ["code": "80100001"], code: .parameterError, status: 400, classification: .ourFault),
            Case(spec: ["code": "80100003"], code: .invalidMessageStructure, status: 400, classification: .ourFault),
            Case(spec: ["code": "80100004"], code: .invalidTTL, status: 400, classification: .ourFault),
            Case(spec: ["code": "80300002"], code: .noPermission, status: 200, classification: .ourFault),
            Case(spec: ["code": "80300002", "http_status": 403], code: .noPermission, status: 403, classification: .ourFault),
            Case(spec: ["code": "80300007"], code: .allTokensInvalid, status: 200, classification: .tokenDead),
            Case(spec: ["code": "80300008"], code: .messageTooBig, status: 200, classification: .ourFault),
            Case(spec: ["code": "80300010"], code: .tooManyTokens, status: 200, classification: .ourFault),
            Case(spec: ["code": "80600003"], code: .requestRejected, status: 200, classification: .ourFault),
            Case(spec: ["code": "81000001"], code: .systemError, status: 500, classification: .retryable),
            Case(spec: ["code": "81000001", "http_status": 200, "retry_after": 3], code: .systemError, status: 200,
                 classification: .retryable, retryAfter: 3),
            Case(spec: ["code": "89999999"], code: .unknown("89999999"), status: 200, classification: .retryable),
            Case(spec: ["code": "89999999", "http_status": 400], code: .unknown("89999999"), status: 400,
                 classification: .ourFault),
            Case(spec: ["http_status": 503, "retry_after": 7], code: nil, status: 503, classification: .retryable,
                 retryAfter: 7),
            Case(spec: ["http_status": 429, "retry_after": 2], code: nil, status: 429, classification: .retryable,
                 retryAfter: 2),
            Case(spec: ["http_status": 502, "body": "Bad Gateway"], code: nil, status: 502, classification: .retryable),
            Case(spec: ["http_status": 404], code: nil, status: 404, classification: .ourFault),
        ]
        for (index, testCase) in cases.enumerated() {
            let token = "device-\(index)"
            var spec = testCase.spec
            spec["token"] = token
            try await fake.inject(http, spec)
            let error = try failure(await client.send(token: token, dataJSON: Array(#"{"k":"v"}"#.utf8)))
            XCTAssertEqual(error.source, .hms, "\(spec)")
            XCTAssertEqual(error.code, testCase.code, "\(spec)")
            XCTAssertEqual(error.httpStatus, testCase.status, "\(spec)")
            XCTAssertEqual(error.classification, testCase.classification, "\(spec)")
            XCTAssertEqual(error.retryAfterSeconds, testCase.retryAfter, "\(spec)")
            XCTAssertEqual(error.minimumRetryDelaySeconds, testCase.retryAfter, "\(spec)")
            XCTAssertEqual(error.isAllTokensInvalid, testCase.code == .allTokensInvalid, "\(spec)")
            XCTAssertFalse(error.namesToken, "\(spec)")
            XCTAssertFalse(error.message.contains(token), "\(spec)")
            XCTAssertFalse(error.description.contains(token), "\(spec)")
        }
        // Per-token injections left other tokens alone, and none of these refreshed the OAuth token.
        guard case .sent = await client.send(token: "healthy", dataJSON: Array("{}".utf8)) else {
            return XCTFail("healthy send failed")
        }
        let tokenRequests = try await tokenRequestCount()
        XCTAssertEqual(tokenRequests, 1)
    }

    func testInjectedTokenExpiryIsRefreshedAndRepeatedTransparently() async throws {
        let client = try makeClient()
        try await fake.inject(http, ["code": "80200003"])
        let result = await client.send(token: "a", dataJSON: Array("{}".utf8))
        guard case .sent = result else { return XCTFail("\(result)") }
        let recorded = try await sends()
        XCTAssertEqual(recorded.compactMap { $0["code"] as? String }, ["80200003", "80000000"])
        XCTAssertEqual(recorded.compactMap { $0["status"] as? Int }, [401, 200])
        // The repeat carried a new access token.
        let authorizations = recorded.compactMap { ($0["headers"] as? [String: String])?["authorization"] }
        XCTAssertEqual(Set(authorizations).count, 2)
        let tokenRequests = try await tokenRequestCount()
        XCTAssertEqual(tokenRequests, 2)
    }

    func testRealTokenExpiryAndRevocationAreRefreshedTransparently() async throws {
        let client = try makeClient()
        guard case .sent = await client.send(token: "a", dataJSON: Array("{}".utf8)) else { return XCTFail("first send") }
        try await fake.expireTokens(http)  // the client's clock still trusts its token: HMS answers 80200003
        guard case .sent = await client.send(token: "b", dataJSON: Array("{}".utf8)) else { return XCTFail("after expiry") }
        try await fake.inject(http, ["revoke_access_tokens": true])  // unknown token: 80200001
        guard case .sent = await client.send(token: "c", dataJSON: Array("{}".utf8)) else { return XCTFail("after revocation") }
        let codes = try await sends().compactMap { $0["code"] as? String }
        XCTAssertEqual(codes, ["80000000", "80200003", "80000000", "80200001", "80000000"])
        let tokenRequests = try await tokenRequestCount()
        XCTAssertEqual(tokenRequests, 3)
    }

    func testPersistentOAuthRefusalIsOurFaultAfterOneRefresh() async throws {
        let client = try makeClient()
        try await fake.inject(http, ["code": "80200001", "count": 2])
        let error = try failure(await client.send(token: "a", dataJSON: Array("{}".utf8)))
        XCTAssertEqual(error.code, .oauthAuthenticationError)
        XCTAssertEqual(error.httpStatus, 401)
        XCTAssertEqual(error.classification, .ourFault)
        let sendCount = try await sends().count
        XCTAssertEqual(sendCount, 2)
        let tokenRequests = try await tokenRequestCount()
        XCTAssertEqual(tokenRequests, 2)
    }

    func testHTTP401WithoutACodeIsRefreshedOnceThenOurFault() async throws {
        let client = try makeClient()
        try await fake.inject(http, ["http_status": 401, "count": 2])
        let error = try failure(await client.send(token: "a", dataJSON: Array("{}".utf8)))
        XCTAssertNil(error.code)
        XCTAssertEqual(error.httpStatus, 401)
        XCTAssertEqual(error.classification, .ourFault)
        let tokenRequests = try await tokenRequestCount()
        XCTAssertEqual(tokenRequests, 2)
    }

    func testPartialSuccessListingTheTokenIsTokenDead() async throws {
        let client = try makeClient()
        let token = "dead-device-token"
        try await fake.inject(http, ["code": "80100000", "token": token])
        let error = try failure(await client.send(token: token, dataJSON: Array("{}".utf8)))
        XCTAssertEqual(error.code, .partialSuccess)
        XCTAssertEqual(error.httpStatus, 200)
        XCTAssertTrue(error.namesToken)
        XCTAssertEqual(error.classification, .tokenDead)
        XCTAssertFalse(error.isAllTokensInvalid)
        XCTAssertFalse(error.message.contains(token), error.message)
        XCTAssertFalse(error.description.contains(token), error.description)
    }

    func testPartialSuccessNotListingTheTokenIsASuccess() async throws {
        let client = try makeClient()
        try await fake.inject(http, ["code": "80100000", "token": "alive", "illegal_tokens": ["someone-else"]])
        let result = await client.send(token: "alive", dataJSON: Array("{}".utf8))
        guard case .sent = result else { return XCTFail("\(result)") }
    }

    func testTimeoutIsRetryable() async throws {
        let client = try makeClient(HMSConfiguration(
            baseURL: fake.baseURL, tokenURL: fake.tokenURL, requestTimeout: .milliseconds(300)))
        _ = await client.send(token: "warm-up", dataJSON: Array("{}".utf8))  // fetch the OAuth token without delay
        try await fake.inject(http, ["delay_ms": 2000])
        let error = try failure(await client.send(token: "slow", dataJSON: Array("{}".utf8)))
        try await fake.inject(http, ["delay_ms": 0])
        XCTAssertEqual(error.source, .transport)
        XCTAssertTrue(error.isTimeout)
        XCTAssertEqual(error.classification, .retryable)
    }

    func testBadClientSecretIsAnAuthenticationOurFault() async throws {
        let wrong = HMSCredentials(
            appId: fake.credentials.appId, clientId: fake.credentials.clientId, clientSecret: "not+the/secret=")
        let client = try makeClient(credentials: wrong)
        let error = try failure(await client.send(token: "a", dataJSON: Array("{}".utf8)))
        XCTAssertEqual(error.source, .authentication)
        XCTAssertEqual(error.httpStatus, 400)
        XCTAssertEqual(error.oauthError, "1101")
        XCTAssertEqual(error.oauthSubError, "20356")
        XCTAssertEqual(error.classification, .ourFault)
        XCTAssertFalse(error.description.contains("not+the/secret="))
        let sendCount = try await sends().count
        XCTAssertEqual(sendCount, 0)
    }

    func testUnknownClientIsAnAuthenticationOurFault() async throws {
        let stranger = HMSCredentials(appId: "999", clientId: "999", clientSecret: "x")
        let error = try failure(await makeClient(credentials: stranger).send(token: "a", dataJSON: Array("{}".utf8)))
        XCTAssertEqual(error.source, .authentication)
        XCTAssertEqual(error.oauthSubError, "20003")
        XCTAssertEqual(error.classification, .ourFault)
    }

    func testTokenEndpointOverloadAndUnreachabilityAreRetryable() async throws {
        let client = try makeClient()
        try await fake.inject(http, ["token_endpoint_error": ["http_status": 503, "error_description": "flow control"]])
        let overloaded = try failure(await client.send(token: "a", dataJSON: Array("{}".utf8)))
        XCTAssertEqual(overloaded.source, .authentication)
        XCTAssertEqual(overloaded.httpStatus, 503)
        XCTAssertEqual(overloaded.classification, .retryable)

        let unreachable = try makeClient(HMSConfiguration(baseURL: fake.baseURL, tokenURL: "http://127.0.0.1:9/token"))
        let error = try failure(await unreachable.send(token: "a", dataJSON: Array("{}".utf8)))
        XCTAssertEqual(error.source, .authentication)
        XCTAssertNotNil(error.transportError)
        XCTAssertEqual(error.classification, .retryable)
    }

    func testInvalidConfigurationIsRejected() throws {
        let good = fake.credentials
        let bad: [(HMSCredentials, HMSConfiguration)] = [
            (HMSCredentials(appId: "", clientId: "1", clientSecret: "s"), HMSConfiguration()),
            (HMSCredentials(appId: "1/../2", clientId: "1", clientSecret: "s"), HMSConfiguration()),
            (HMSCredentials(appId: "1", clientId: "1", clientSecret: ""), HMSConfiguration()),
            (good, HMSConfiguration(baseURL: "push-api.cloud.huawei.com")),
            (good, HMSConfiguration(tokenURL: "ftp://example/token")),
        ]
        for (credentials, configuration) in bad {
            XCTAssertThrowsError(try HMSClient(
                credentials: credentials, httpClient: http, configuration: configuration, logger: testLogger("t")))
        }
        XCTAssertFalse("\(good)".contains(good.clientSecret))
    }

    func testSendOverTLSUsesHTTP2() async throws {
        let tlsFake: FakeHMSProcess
        do {
            tlsFake = try FakeHMSProcess(tls: true)
        } catch {
            throw XCTSkip("fake HMS server over TLS unavailable: \(error)")
        }
        defer { tlsFake.stop() }
        let caFile = try XCTUnwrap(tlsFake.caFile)
        XCTAssertTrue(tlsFake.baseURL.hasPrefix("https://"))
        let tlsHTTP = try HTTPClient(configuration: HTTPClientConfiguration(caFile: caFile), logger: testLogger("test.tls"))
        let client = try HMSClient(
            credentials: tlsFake.credentials, httpClient: tlsHTTP,
            configuration: HMSConfiguration(baseURL: tlsFake.baseURL, tokenURL: tlsFake.tokenURL),
            logger: testLogger("test.hms"))
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<20 {
                group.addTask {
                    if case .sent = await client.send(token: "tls-\(index)", dataJSON: Array("{}".utf8)) { return true }
                    return false
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        XCTAssertEqual(results.filter { $0 }.count, 20)
        let recorded = try await tlsFake.snapshot(tlsHTTP)
        let versions = Set((recorded["sends"] as? [[String: Any]] ?? []).compactMap { $0["http_version"] as? String })
        XCTAssertEqual(versions, ["2"])
        let tokenVersions = Set((recorded["token_requests"] as? [[String: Any]] ?? []).compactMap { $0["http_version"] as? String })
        XCTAssertEqual(tokenVersions, ["2"])
        await tlsHTTP.shutdown()
    }
}
