import CurlHTTP
import Providers
import SSLCrypto
import WebPush
import XCTest

final class WebPushMessageTests: XCTestCase {
    private func subscription(_ browser: ECPrivateKey, auth: [UInt8], endpoint: String = "https://push.example.net/wpush/v2/gAAAA-x?y=1") throws -> WebPushSubscription {
        try WebPushSubscription(
            endpoint: endpoint, p256dh: Base64URL.encode(browser.publicKey.uncompressedPoint), auth: Base64URL.encode(auth))
    }

    func testTheRequestCarriesTheEncryptedMessageAndTheHeadersOfRFC8030() throws {
        let browser = try ECPrivateKey()
        let auth = try SecureRandom.bytes(16)
        let vapidKey = try ECPrivateKey()
        let vapid = try VAPIDSigner(key: vapidKey, subject: "mailto:ops@example.com")
        let payload = Array(#"{"v":2,"t":"app","p":"/users/1"}"#.utf8)
        let request = try WebPushMessage.request(
            payload, to: subscription(browser, auth: auth), vapid: vapid, expiresAt: 1_800_000_000, ttl: 3600,
            urgency: .high, topic: "users-1")
        XCTAssertEqual(request.method, .post)
        XCTAssertEqual(request.url, "https://push.example.net/wpush/v2/gAAAA-x?y=1")
        let headers = Dictionary(request.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
        XCTAssertEqual(headers["content-encoding"], "aes128gcm")
        XCTAssertEqual(headers["content-type"], "application/octet-stream")
        XCTAssertEqual(headers["ttl"], "3600")
        XCTAssertEqual(headers["urgency"], "high")
        XCTAssertEqual(headers["topic"], "users-1")
        let authorization = try XCTUnwrap(headers["authorization"])
        XCTAssertTrue(authorization.hasPrefix("vapid t="))
        XCTAssertTrue(authorization.hasSuffix(", k=\(vapid.publicKey)"))
        let claims = try XCTUnwrap(Base64URL.decode(String(authorization.split(separator: ".")[1])))
        XCTAssertTrue(String(decoding: claims, as: UTF8.self).hasPrefix(#"{"aud":"https://push.example.net","#))
        XCTAssertEqual(try WebPushEncryption.decrypt(request.body, userAgentKey: browser, authSecret: auth), payload)
        XCTAssertEqual(request.responseHeaderNames, ["retry-after"])
    }

    func testBadSubscriptionsAndTopicsAreRefused() throws {
        let browser = try ECPrivateKey()
        let point = Base64URL.encode(try browser.publicKey.uncompressedPoint)
        let auth = Base64URL.encode(try SecureRandom.bytes(16))
        XCTAssertNoThrow(try WebPushSubscription(endpoint: "https://push.example.net/x", p256dh: point, auth: auth))
        XCTAssertThrowsError(try WebPushSubscription(endpoint: "ftp://push.example.net/x", p256dh: point, auth: auth))
        XCTAssertThrowsError(try WebPushSubscription(endpoint: "https://user@push.example.net/x", p256dh: point, auth: auth))
        XCTAssertThrowsError(try WebPushSubscription(endpoint: "https://push.example.net/x", p256dh: "AAAA", auth: auth))
        XCTAssertThrowsError(try WebPushSubscription(endpoint: "https://push.example.net/x", p256dh: point, auth: "AAAA"))
        XCTAssertTrue(WebPushMessage.isValidTopic(String(repeating: "a", count: 32)))
        XCTAssertFalse(WebPushMessage.isValidTopic(String(repeating: "a", count: 33)))
        XCTAssertFalse(WebPushMessage.isValidTopic("users/1"))
        XCTAssertFalse(WebPushMessage.isValidTopic(""))
        let vapid = try VAPIDSigner(key: ECPrivateKey(), subject: "mailto:ops@example.com")
        let sub = try WebPushSubscription(endpoint: "https://push.example.net/x", p256dh: point, auth: auth)
        XCTAssertThrowsError(try WebPushMessage.request([1], to: sub, vapid: vapid, expiresAt: 0, ttl: 60, topic: "a b"))
        XCTAssertThrowsError(try WebPushMessage.request(
            [UInt8](repeating: 1, count: 3994), to: sub, vapid: vapid, expiresAt: 0, ttl: 60))
    }

    func testAnswersAreClassifiedAsTheIssueSays() {
        func failure(_ status: Int, _ retryAfter: String? = nil) -> DeliveryFailure? {
            if case .failed(let failure) = WebPushMessage.outcome(status: status, retryAfter: retryAfter, now: 1_800_000_000) {
                return failure
            }
            return nil
        }
        for status in [200, 201, 202] {
            guard case .sent = WebPushMessage.outcome(status: status, retryAfter: nil, now: 0) else {
                return XCTFail("\(status) is a delivery")
            }
        }
        XCTAssertEqual(failure(404)?.classification, .tokenDead)
        XCTAssertEqual(failure(410)?.classification, .tokenDead)
        XCTAssertEqual(failure(413)?.classification, .rejected)
        XCTAssertEqual(failure(413)?.reason, "too_big")
        XCTAssertEqual(failure(429, "30")?.classification, .retryable)
        XCTAssertEqual(failure(429, "30")?.retryAfter, 30)
        XCTAssertEqual(failure(503)?.classification, .retryable)
        for status in [400, 401, 403, 405] {
            XCTAssertEqual(failure(status)?.classification, .ourFault, "\(status)")
        }
    }
}
