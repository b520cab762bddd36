import XCTest

@testable import Providers

final class WebhookClientTests: XCTestCase {
    /// The vector is from the `standardwebhooks` package (PyPI): `Webhook(secret).sign("msg_abc", 1700000000, '{"a":1}')`.
    func testSignatureMatchesTheStandardWebhooksLibrary() throws {
        let secret = "whsec_" + WebhookSigner.encodeBase64(Array(repeating: UInt8(ascii: "k"), count: 32))
        let signer = try WebhookSigner(secrets: [secret])
        XCTAssertEqual(
            signer.signature(id: "msg_abc", timestamp: 1_700_000_000, body: Array(#"{"a":1}"#.utf8)),
            "v1,F506XMyaMxkJp87tya4R/XU9/3O2wNFsZZFWnMUKNhM=")
        let two = try WebhookSigner(secrets: [secret, "whsec_" + WebhookSigner.encodeBase64(Array(repeating: 1, count: 24))])
        let parts = two.signature(id: "msg_abc", timestamp: 1_700_000_000, body: Array(#"{"a":1}"#.utf8)).split(separator: " ")
        XCTAssertEqual(parts.count, 2)
        XCTAssertEqual(parts[0], "v1,F506XMyaMxkJp87tya4R/XU9/3O2wNFsZZFWnMUKNhM=")
    }

    func testSecretsAreChecked() {
        XCTAssertThrowsError(try WebhookSigner(secrets: []))
        XCTAssertThrowsError(try WebhookSigner(secrets: ["abc"]))
        XCTAssertThrowsError(try WebhookSigner(secrets: ["whsec_" + WebhookSigner.encodeBase64(Array(repeating: 1, count: 23))]))
        XCTAssertThrowsError(try WebhookSigner(secrets: ["whsec_" + WebhookSigner.encodeBase64(Array(repeating: 1, count: 65))]))
        XCTAssertThrowsError(try WebhookSigner(secrets: ["whsec_not base64!"]))
        XCTAssertNoThrow(try WebhookSigner(secrets: ["whsec_" + WebhookSigner.encodeBase64(Array(repeating: 1, count: 64))]))
    }

    func testStatusesAreClassified() {
        func classification(_ status: Int) -> ProviderClassification? {
            if case .failed(let failure) = WebhookClient.classify(status: status, retryAfter: nil, now: 0) { return failure.classification }
            return nil
        }
        XCTAssertNil(classification(200))
        XCTAssertNil(classification(204))
        XCTAssertEqual(classification(410), .tokenDead)
        XCTAssertEqual(classification(429), .retryable)
        XCTAssertEqual(classification(500), .retryable)
        XCTAssertEqual(classification(503), .retryable)
        XCTAssertEqual(classification(400), .rejected)
        XCTAssertEqual(classification(404), .rejected)
        XCTAssertEqual(classification(301), .rejected)
        guard case .failed(let failure) = WebhookClient.classify(status: 429, retryAfter: "7", now: 0) else { return XCTFail() }
        XCTAssertEqual(failure.retryAfter, 7)
        XCTAssertEqual(failure.reason, "http_429")
    }
}
