import CurlHTTP
import Synchronization
import XCTest

@testable import Providers

/// HMS pieces without I/O: the encoder, the answer parser, the classification table, the token form and cache.
final class HMSUnitTests: XCTestCase {
    func testEncoderWritesDataAsAJSONString() {
        let data = Array(#"{"t":"value","d":"{\"a\":1}\n"}"#.utf8)
        let body = String(decoding: HMSMessageEncoder.encodeMessage(token: "tok\"1", dataJSON: data), as: UTF8.self)
        XCTAssertEqual(
            body,
            #"{"validate_only":false,"message":{"data":"{\"t\":\"value\",\"d\":\"{\\\"a\\\":1}\\n\"}","android":{"urgency":"HIGH"},"token":["tok\"1"]}}"#)
        let pairs = HMSMessageEncoder.encodeMessage(token: "t", data: [("k", "v")])
        XCTAssertEqual(
            String(decoding: pairs, as: UTF8.self),
            #"{"validate_only":false,"message":{"data":"{\"k\":\"v\"}","android":{"urgency":"HIGH"},"token":["t"]}}"#)
    }

    func testValidateOnlyMarksATestMessage() {
        let body = HMSMessageEncoder.encodeMessage(token: "t", dataJSON: Array(#"{"k":"v"}"#.utf8), validateOnly: true)
        XCTAssertEqual(
            String(decoding: body, as: UTF8.self),
            #"{"validate_only":true,"message":{"data":"{\"k\":\"v\"}","android":{"urgency":"HIGH"},"token":["t"]}}"#)
    }

    func testResultCodesRoundTrip() {
        for raw in ["80000000", "80100000", "80100001", "80100003", "80100004", "80200001", "80200003", "80300002",
                    "80300007", "80300008", "80300010", "80600003", "81000001", "12345678"] {
            XCTAssertEqual(HMSResultCode(rawValue: raw).rawValue, raw)
        }
        XCTAssertEqual(HMSResultCode(rawValue: "12345678"), .unknown("12345678"))
        XCTAssertTrue(HMSResultCode.oauthTokenExpired.isOAuthTokenRefusal)
        XCTAssertFalse(HMSResultCode.noPermission.isOAuthTokenRefusal)
    }

    func testClassificationTable() {
        func hms(_ code: String?, _ status: Int = 200, namesToken: Bool = false) -> ProviderClassification {
            HMSError.classify(source: .hms, code: code.map(HMSResultCode.init(rawValue:)), httpStatus: status, namesToken: namesToken)
        }
        XCTAssertEqual(hms("80100000", namesToken: true), .tokenDead)
        XCTAssertEqual(hms("80100000"), .retryable)
        XCTAssertEqual(hms("80300007"), .tokenDead)
        for code in ["80100001", "80100003", "80100004", "80200001", "80200003", "80300002", "80300008", "80300010", "80600003"] {
            XCTAssertEqual(hms(code), .ourFault, code)
        }
        XCTAssertEqual(hms("81000001", 500), .retryable)
        XCTAssertEqual(hms("88888888"), .retryable)
        XCTAssertEqual(hms(nil, 503), .retryable)
        XCTAssertEqual(hms(nil, 429), .retryable)
        XCTAssertEqual(hms(nil, 401), .ourFault)
        XCTAssertEqual(hms("80000000", 503), .retryable)
        XCTAssertEqual(HMSError.classify(source: .transport, code: nil, httpStatus: nil, namesToken: false), .retryable)
        XCTAssertEqual(HMSError.classify(source: .cancelled, code: nil, httpStatus: nil, namesToken: false), .retryable)
        XCTAssertEqual(HMSError.classify(source: .authentication, code: nil, httpStatus: nil, namesToken: false), .retryable)
        XCTAssertEqual(HMSError.classify(source: .authentication, code: nil, httpStatus: 503, namesToken: false), .retryable)
        XCTAssertEqual(HMSError.classify(source: .authentication, code: nil, httpStatus: 400, namesToken: false), .ourFault)
    }

    private func outcome(_ status: Int, _ body: String, token: String = "device-tok-A", headers: [(name: String, value: String)] = [])
        -> HMSResponseParser.Outcome
    {
        HMSResponseParser.outcome(
            of: HTTPResponse(status: status, headers: headers, body: Array(body.utf8)), pushToken: token)
    }

    func testParserReadsSuccessAndPartialSuccess() {
        guard case .sent(let id) = outcome(200, #"{"code":"80000000","msg":"Success","requestId":"r1"}"#) else {
            return XCTFail("success")
        }
        XCTAssertEqual(id, "r1")
        let listed = #"{"code":"80100000","msg":"{\"success\":0,\"failure\":1,\"illegal_tokens\":[\"device-tok-A\"]}","requestId":"r2"}"#
        guard case .failed(let dead) = outcome(200, listed) else { return XCTFail("listed") }
        XCTAssertTrue(dead.namesToken)
        XCTAssertEqual(dead.classification, .tokenDead)
        XCTAssertEqual(dead.requestID, "r2")
        XCTAssertFalse(dead.message.contains("device-tok-A"))
        // The newer spelling, an object of arrays by reason.
        let byReason = #"{"code":"80100000","msg":"{\"failure\":1,\"illegalTokens\":{\"tokenFormatError\":[\"device-tok-A\"]}}"}"#
        guard case .failed(let dead2) = outcome(200, byReason) else { return XCTFail("by reason") }
        XCTAssertTrue(dead2.namesToken)
        let other = #"{"code":"80100000","msg":"{\"success\":1,\"failure\":1,\"illegal_tokens\":[\"device-tok-B\"]}"}"#
        guard case .sent = outcome(200, other) else { return XCTFail("not listed, one success") }
        guard case .failed(let unreadable) = outcome(200, #"{"code":"80100000","msg":"garbled"}"#) else {
            return XCTFail("unreadable")
        }
        XCTAssertEqual(unreadable.classification, .retryable)
    }

    func testParserRedactsTheTokenAndReadsRetryAfter() {
        guard case .failed(let error) = outcome(
            503, #"{"code":"81000001","msg":"busy for device-tok-A"}"#, headers: [("retry-after", "12")])
        else { return XCTFail("error") }
        XCTAssertEqual(error.code, .systemError)
        XCTAssertEqual(error.retryAfterSeconds, 12)
        XCTAssertFalse(error.message.contains("device-tok-A"))
        XCTAssertTrue(error.message.contains(Redaction.fingerprint("device-tok-A")))
        XCTAssertEqual(HMSResponseParser.redact("Oauth Token expired", "a"), "Oauth Token expired")
        XCTAssertEqual(
            HMSResponseParser.redact("bad device-token-1!", "device-token-1"),
            "bad \(Redaction.fingerprint("device-token-1"))!")
        guard case .failed(let numeric) = outcome(200, #"{"code":80300007,"msg":"x"}"#) else { return XCTFail("numeric") }
        XCTAssertEqual(numeric.code, .allTokensInvalid)
        guard case .failed(let html) = outcome(502, "<html>bad gateway</html>") else { return XCTFail("html") }
        XCTAssertNil(html.code)
        XCTAssertEqual(html.classification, .retryable)
        guard case .failed(let successOn500) = outcome(500, #"{"code":"80000000"}"#) else { return XCTFail("500") }
        XCTAssertEqual(successOn500.classification, .retryable)
    }

    func testTokenFormIsPercentEncoded() throws {
        let fetcher = HMSTokenFetcher(
            credentials: HMSCredentials(appId: "1", clientId: "10 7", clientSecret: "a+b/c=d&é~"),
            endpoint: OAuthTokenEndpoint<HMSError>(
                http: try HTTPClient(logger: testLogger("t")), url: "http://127.0.0.1:9/", timeout: .seconds(1),
                errorStyle: .withSubError, provider: "HMS", account: [:], logger: testLogger("t")),
            now: WallClock.now)
        XCTAssertEqual(
            String(decoding: fetcher.formBody(), as: UTF8.self),
            "grant_type=client_credentials&client_id=10%207&client_secret=a%2Bb%2Fc%3Dd%26%C3%A9~")
    }

    func testTokenManagerCachesAndBacksOffAfterFailures() async throws {
        let time = Mutex<Double>(1_000_000)
        let fetches = Mutex<Int>(0)
        let fail = Mutex<Bool>(false)
        let manager = HMSAccessTokenManager(
            refreshMargin: .seconds(300), failureBackoff: .seconds(1), now: { time.withLock { $0 } },
            fetch: { () async throws(HMSError) -> OAuthAccessToken in
                let number = fetches.withLock { $0 += 1; return $0 }
                if fail.withLock({ $0 }) {
                    throw HMSError(source: .authentication, httpStatus: 400, oauthError: "1101", message: "no")
                }
                let now = time.withLock { $0 }
                return OAuthAccessToken(value: "tok-\(number)", obtainedAt: now, expiresAt: now + 3600)
            })
        let first = try await manager.accessToken()
        let second = try await manager.accessToken()
        XCTAssertEqual([first, second], ["tok-1", "tok-1"])
        await manager.invalidate("tok-1")
        fail.withLock { $0 = true }
        do {
            _ = try await manager.accessToken()
            XCTFail("the fetch failed")
        } catch {
            XCTAssertEqual(error.oauthError, "1101")
        }
        do {
            _ = try await manager.accessToken()  // within the backoff: same error, no new fetch
            XCTFail("still backing off")
        } catch {
            XCTAssertEqual(error.classification, .ourFault)
        }
        XCTAssertEqual(fetches.withLock { $0 }, 2)
        fail.withLock { $0 = false }
        time.withLock { $0 += 2 }
        let third = try await manager.accessToken()
        XCTAssertEqual(third, "tok-3")
    }
}
