import CurlHTTP
import XCTest

@testable import Providers

final class FCMErrorTests: XCTestCase {
    private func response(_ status: Int, _ body: String, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, body: Array(body.utf8))
    }

    private func fcmBody(_ status: Int, _ rpcStatus: String, _ code: String?, fields: [String] = []) -> String {
        var details: [String] = []
        if let code {
            details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(code)"}"#)
        }
        if !fields.isEmpty {
            let violations = fields.map { #"{"field":"\#($0)","description":"bad"}"# }.joined(separator: ",")
            details.append(#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[\#(violations)]}"#)
        }
        return #"{"error":{"code":\#(status),"message":"m \/ x","status":"\#(rpcStatus)","details":[\#(details.joined(separator: ","))]}}"#
    }

    func testParsesTheDocumentedErrorBody() {
        let error = FCMResponseParser.error(from: response(
            400, fcmBody(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", fields: ["message.token"])))
        XCTAssertEqual(error.code, .invalidArgument)
        XCTAssertEqual(error.httpStatus, 400)
        XCTAssertEqual(error.status, "INVALID_ARGUMENT")
        XCTAssertEqual(error.message, "m / x")
        XCTAssertEqual(error.fieldViolations, ["message.token"])
        XCTAssertTrue(error.namesToken)
        XCTAssertEqual(error.classification, .tokenDead)
        XCTAssertEqual(error.source, .fcm)
    }

    func testClassificationTable() {
        let cases: [(Int, String, String?, [String], ProviderClassification)] = [
            (404, "NOT_FOUND", "UNREGISTERED", [], .tokenDead),
            (403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH", [], .tokenDead),
            (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", ["message.token"], .tokenDead),
            (400, "INVALID_ARGUMENT", nil, ["message.token"], .ourFault),  // no errorCode: status decides
            (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", ["message.data[0].value"], .ourFault),
            (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", [], .ourFault),
            (401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR", [], .ourFault),
            (429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", [], .retryable),
            (503, "UNAVAILABLE", "UNAVAILABLE", [], .retryable),
            (500, "INTERNAL", "INTERNAL", [], .retryable),
            (500, "UNKNOWN", "UNSPECIFIED_ERROR", [], .retryable),
            (401, "UNAUTHENTICATED", nil, [], .ourFault),
            (403, "PERMISSION_DENIED", nil, [], .ourFault),
            (404, "NOT_FOUND", nil, [], .ourFault),
            (418, "TEAPOT", "SOMETHING_NEW", [], .ourFault),
            (502, "BAD_GATEWAY", "SOMETHING_NEW", [], .retryable),
        ]
        for (status, rpc, code, fields, expected) in cases {
            let error = FCMResponseParser.error(from: response(status, fcmBody(status, rpc, code, fields: fields)))
            XCTAssertEqual(error.classification, expected, "\(status) \(code ?? "-") \(fields)")
            XCTAssertEqual(error.code, code.map(FCMErrorCode.init(rawValue:)))
        }
        XCTAssertEqual(
            FCMResponseParser.error(from: response(418, fcmBody(418, "X", "SOMETHING_NEW"))).code,
            .unknown("SOMETHING_NEW"))
    }

    func testUnparsableBodiesAreClassifiedByStatus() {
        XCTAssertEqual(FCMResponseParser.error(from: response(502, "<html>bad gateway</html>")).classification, .retryable)
        XCTAssertEqual(FCMResponseParser.error(from: response(400, "nope")).classification, .ourFault)
        XCTAssertEqual(FCMResponseParser.error(from: response(302, "")).classification, .retryable)
    }

    func testRetryAfterAndQuotaMinimumDelay() {
        let quota = FCMResponseParser.error(from: response(
            429, fcmBody(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), headers: [("retry-after", "30")]))
        XCTAssertEqual(quota.retryAfterSeconds, 30)
        XCTAssertEqual(quota.minimumRetryDelaySeconds, 60)
        let unavailable = FCMResponseParser.error(from: response(
            503, fcmBody(503, "UNAVAILABLE", "UNAVAILABLE"), headers: [("retry-after", "120")]))
        XCTAssertEqual(unavailable.minimumRetryDelaySeconds, 120)
        XCTAssertNil(FCMResponseParser.error(from: response(500, fcmBody(500, "INTERNAL", "INTERNAL"))).minimumRetryDelaySeconds)
    }

    func testRetryAfterParsing() {
        XCTAssertEqual(RetryAfter.seconds(from: " 17 "), 17)
        XCTAssertEqual(RetryAfter.seconds(from: "Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_700), 77)
        XCTAssertEqual(RetryAfter.seconds(from: "Sun, 06 Nov 1994 08:49:37 GMT", now: 784_111_800), 0)
        XCTAssertNil(RetryAfter.seconds(from: "-5"))
        XCTAssertNil(RetryAfter.seconds(from: "soon"))
        XCTAssertNil(RetryAfter.seconds(from: "Sun, 06 Nov 1994 08:49:37 PST"))
    }

    func testTransportAndAuthenticationRows() {
        XCTAssertEqual(FCMError.classify(source: .transport, code: nil, httpStatus: nil, namesToken: false), .retryable)
        XCTAssertEqual(FCMError.classify(source: .cancelled, code: nil, httpStatus: nil, namesToken: false), .retryable)
        XCTAssertEqual(FCMError.classify(source: .authentication, code: nil, httpStatus: nil, namesToken: false), .retryable)
        XCTAssertEqual(FCMError.classify(source: .authentication, code: nil, httpStatus: 400, namesToken: false), .ourFault)
        XCTAssertEqual(FCMError.classify(source: .authentication, code: nil, httpStatus: 503, namesToken: false), .retryable)
        // An FCM-looking code on the token endpoint does not make a token dead.
        XCTAssertEqual(FCMError.classify(source: .authentication, code: .unregistered, httpStatus: 404, namesToken: false), .ourFault)
    }

    func testFingerprintHidesTheSecret() {
        let token = "dGhpcyBpcyBhIHB1c2ggdG9rZW4gdGhhdCBtdXN0IG5vdCBiZSBsb2dnZWQ"
        let print = Redaction.fingerprint(token)
        XCTAssertEqual(print.count, 12)
        XCTAssertTrue(print.hasPrefix("tok#"))
        XCTAssertFalse(print.contains(token.prefix(4)))
        XCTAssertEqual(print, Redaction.fingerprint(token))
        XCTAssertNotEqual(print, Redaction.fingerprint(token + "x"))
    }
}
