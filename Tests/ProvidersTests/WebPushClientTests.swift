import CurlHTTP
import Logging
import PushCore
import SSLCrypto
import WebPush
import XCTest

@testable import Providers

/// ``WebPushClient``'s own decisions, without a push service: the VAPID header reused per origin, the topic of a
/// collapse key, and the refusals made before any request (an address that is not public, a subscription that
/// cannot be read). Delivery to a push service is tested end to end (tests/e2e/test_webpush.py).
final class WebPushClientTests: XCTestCase {
    func testOneVAPIDHeaderPerOriginIsReusedUntilAnHourBeforeItEnds() throws {
        let authorizations = VAPIDAuthorizations(signer: try VAPIDSigner(key: ECPrivateKey(), subject: "mailto:ops@example.com"))
        let first = try authorizations.header(audience: "https://push.example.net", now: 1_000_000)
        XCTAssertEqual(try authorizations.header(audience: "https://push.example.net", now: 1_000_000 + 10 * 3600), first)
        XCTAssertNotEqual(try authorizations.header(audience: "https://other.example.net", now: 1_000_000), first, "one per origin")
        let renewed = try authorizations.header(audience: "https://push.example.net", now: 1_000_000 + 11 * 3600 + 1)
        XCTAssertNotEqual(renewed, first, "less than an hour left: signed again")
        let claims = try XCTUnwrap(Base64URL.decode(String(renewed.split(separator: ".")[1])))
        let expiry: Int = 1_000_000 + 23 * 3600 + 1
        XCTAssertTrue(String(decoding: claims, as: UTF8.self).contains("\"exp\":\(expiry)"))
    }

    func testACollapseKeyBecomesATopic() {
        XCTAssertEqual(WebPushMessage.topic(forCollapseKey: "scores-1"), "scores-1")
        let hashed = WebPushMessage.topic(forCollapseKey: "scores/1 (live)")
        XCTAssertEqual(hashed.count, 32)
        XCTAssertTrue(WebPushMessage.isValidTopic(hashed))
        XCTAssertEqual(WebPushMessage.topic(forCollapseKey: "scores/1 (live)"), hashed, "the same key, the same topic")
        XCTAssertNotEqual(WebPushMessage.topic(forCollapseKey: "scores/2 (live)"), hashed)
    }

    func testAnEndpointThatIsNotPublicOrASubscriptionThatCannotBeReadIsRefusedBeforeAnyRequest() async throws {
        let http = try HTTPClient(configuration: HTTPClientConfiguration(), logger: Logger(label: "test"))
        let client = WebPushClient(http: http, vapid: try VAPIDSigner(key: ECPrivateKey(), subject: "mailto:ops@example.com"), settings: .init())
        let point = Base64URL.encode(try ECPrivateKey().publicKey.uncompressedPoint)
        let auth = Base64URL.encode(Array(repeating: UInt8(1), count: 16))
        func reason(_ token: String) async -> String? {
            guard case .failed(let failure) = await client.send(subscription: token, payload: [1]) else { return nil }
            XCTAssertEqual(failure.classification, .rejected)
            return failure.reason
        }
        for endpoint in ["https://127.0.0.1:1/push", "https://[::1]:1/push", "https://10.1.2.3/push", "https://169.254.169.254/push"] {
            let reached = await reason(SubscriberKey.webPushToken(endpoint: endpoint, p256dh: point, auth: auth))
            XCTAssertEqual(reached, "address_refused", endpoint)
        }
        let unread = await reason("https://push.example.net/x")
        XCTAssertEqual(unread, "invalid_subscription")
        let badKey = await reason(SubscriberKey.webPushToken(endpoint: "https://push.example.net/x", p256dh: "AAAA", auth: auth))
        XCTAssertEqual(badKey, "invalid_subscription")
        await http.shutdown()
    }
}
