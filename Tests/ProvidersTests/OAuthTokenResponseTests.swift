import CurlHTTP
import XCTest

@testable import Providers

/// The token-response parser both token fetchers use (Google's JWT grant, Huawei's client credentials).
final class OAuthTokenResponseTests: XCTestCase {
    private func read(
        _ status: Int, _ body: String, headers: [(name: String, value: String)] = [],
        style: OAuthTokenResponse.ErrorStyle = .standard
    ) -> OAuthTokenResponse.Outcome {
        OAuthTokenResponse.read(
            HTTPResponse(status: status, headers: headers, body: Array(body.utf8)), requestedAt: 1000, errorStyle: style)
    }

    struct UnexpectedOutcome: Error {
        let outcome: OAuthTokenResponse.Outcome
    }

    /// The failure of a refusal (`refused`) or of an unusable 200; throws for any other outcome.
    private func failure(_ outcome: OAuthTokenResponse.Outcome, refused: Bool) throws -> OAuthTokenFailure {
        switch (outcome, refused) {
        case (.refused(let failure), true), (.unusable(let failure), false): return failure
        default: throw UnexpectedOutcome(outcome: outcome)
        }
    }

    func testReadsAToken() throws {
        guard case .token(let token, let expiresIn) = read(200, #"{"access_token":"ya29.x","expires_in":3599,"token_type":"Bearer"}"#)
        else { return XCTFail("no token") }
        XCTAssertEqual(token.value, "ya29.x")
        XCTAssertEqual(token.obtainedAt, 1000)
        XCTAssertEqual(token.expiresAt, 4599)
        XCTAssertEqual(expiresIn, 3599)
        // `token_type` is optional and case-insensitive.
        guard case .token = read(200, #"{"access_token":"a","expires_in":60}"#) else { return XCTFail("no type") }
        guard case .token = read(200, #"{"access_token":"a","expires_in":60,"token_type":"bearer"}"#) else {
            return XCTFail("lower case")
        }
    }

    func testUnusableAnswersOf200() throws {
        for body in [
            #"{"expires_in":3600}"#, #"{"access_token":"","expires_in":3600}"#, #"{"access_token":"a","expires_in":0}"#,
            #"{"access_token":"a","expires_in":"3600"}"#, "not json",
        ] {
            let failure = try failure(read(200, body), refused: false)
            XCTAssertEqual(failure.message, "token endpoint answered 200 without access_token/expires_in", body)
            XCTAssertEqual(failure.httpStatus, 200)
            XCTAssertNil(failure.error)
        }
        let mac = try failure(read(200, #"{"access_token":"a","expires_in":60,"token_type":"mac"}"#), refused: false)
        XCTAssertEqual(mac.message, "token endpoint issued an unsupported token_type mac")
    }

    func testRefusalsInGooglesStyle() throws {
        let refused = try failure(
            read(400, #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#), refused: true)
        XCTAssertEqual(refused.httpStatus, 400)
        XCTAssertEqual(refused.error, "invalid_grant")
        XCTAssertNil(refused.subError)
        XCTAssertEqual(refused.message, "token endpoint refused: Invalid JWT Signature.")
        XCTAssertEqual(FCMError.tokenFailure(refused).classification, .ourFault)
        XCTAssertEqual(FCMError.tokenFailure(refused).status, "invalid_grant")
        // RFC 6749 writes `error` as a string: a number is not read in this style.
        XCTAssertNil(try failure(read(400, #"{"error":1101}"#), refused: true).error)
    }

    func testRefusalsInHuaweisStyle() throws {
        let refused = try failure(
            read(401, #"{"error":1101,"sub_error":20356,"error_description":"invalid client_secret"}"#, style: .withSubError),
            refused: true)
        XCTAssertEqual(refused.error, "1101")
        XCTAssertEqual(refused.subError, "20356")
        XCTAssertEqual(refused.message, "token endpoint refused: invalid client_secret")
        let error = HMSError.tokenFailure(refused)
        XCTAssertEqual(error.oauthError, "1101")
        XCTAssertEqual(error.oauthSubError, "20356")
        XCTAssertEqual(error.classification, .ourFault)
    }

    func testUnreadableRefusalsKeepTheStatusAndRetryAfter() throws {
        let busy = try failure(read(503, "<html>busy</html>", headers: [("retry-after", "7")]), refused: true)
        XCTAssertEqual(busy.message, "token endpoint refused: HTTP 503")
        XCTAssertEqual(busy.retryAfterSeconds, 7)
        XCTAssertNil(busy.error)
        XCTAssertEqual(FCMError.tokenFailure(busy).classification, .retryable)
        XCTAssertEqual(HMSError.tokenFailure(busy).classification, .retryable)
        XCTAssertEqual(HMSError.tokenFailure(busy).retryAfterSeconds, 7)
    }
}
