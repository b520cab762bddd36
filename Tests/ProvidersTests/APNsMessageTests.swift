import CurlHTTP
import Providers
import XCTest

final class APNsMessageTests: XCTestCase {
    private let token = String(repeating: "ab01", count: 16)

    func testABackgroundPushCarriesTheDataDocumentAndApplesHeaders() throws {
        let data = Array(#"{"srv":"webcom","ver":"v2","evt":"e.y.j"}"#.utf8)
        let request = try APNsMessage.request(
            data: data, token: token, bundleID: "com.example.app", providerToken: "jwt.jwt.jwt",
            baseURL: APNsMessage.developmentBaseURL, expiration: 1_800_000_000, collapseKey: "inbox")
        XCTAssertEqual(request.method, .post)
        XCTAssertEqual(request.url, "https://api.sandbox.push.apple.com/3/device/" + token)
        XCTAssertEqual(
            String(decoding: request.body, as: UTF8.self),
            #"{"aps":{"content-available":1},"data":{"srv":"webcom","ver":"v2","evt":"e.y.j"}}"#)
        XCTAssertEqual(request.headers.map(\.name), [
            "authorization", "apns-push-type", "apns-priority", "apns-topic", "apns-expiration", "apns-collapse-id",
        ])
        XCTAssertEqual(request.headers.map(\.value), [
            "bearer jwt.jwt.jwt", "background", "5", "com.example.app", "1800000000", "inbox",
        ])
        let long = String(repeating: "k", count: 65)
        let hashed = try APNsMessage.request(data: data, token: token, bundleID: "b", providerToken: "t", collapseKey: long)
        XCTAssertEqual(hashed.headers.last?.value, FCMMessageEncoder.apnsCollapseID(long))
        XCTAssertLessThanOrEqual(hashed.headers.last?.value.utf8.count ?? 99, 64)
    }

    func testTokensAndSizesOutsideAPNsRulesAreRefused() {
        XCTAssertThrowsError(try APNsMessage.request(data: Array("{}".utf8), token: "xyz", bundleID: "b", providerToken: "t"))
        XCTAssertThrowsError(try APNsMessage.request(data: Array("{}".utf8), token: "abc", bundleID: "b", providerToken: "t"))
        XCTAssertThrowsError(try APNsMessage.request(data: Array("{}".utf8), token: "", bundleID: "b", providerToken: "t"))
        let wrapper = #"{"aps":{"content-available":1},"data":}"#.utf8.count
        let fits = Array(#"{"a":""#.utf8) + [UInt8](repeating: 0x61, count: 4096 - wrapper - 8) + Array(#""}"#.utf8)
        XCTAssertNoThrow(try APNsMessage.request(data: fits, token: token, bundleID: "b", providerToken: "t"))
        XCTAssertThrowsError(try APNsMessage.request(data: fits + [0x20], token: token, bundleID: "b", providerToken: "t"))
    }

    func testAnswersAreClassifiedAsTheIssueSays() {
        func outcome(_ status: Int, _ reason: String?, retryAfter: String? = nil) -> (DeliveryFailure?, Bool) {
            let body = reason.map { Array(#"{"reason":"\#($0)","timestamp":1700000000000}"#.utf8) } ?? []
            let (outcome, refused) = APNsMessage.outcome(status: status, body: body, retryAfter: retryAfter, now: 1_800_000_000)
            if case .failed(let failure) = outcome { return (failure, refused) }
            return (nil, refused)
        }
        guard case .sent = APNsMessage.outcome(status: 200, body: [], retryAfter: nil, now: 0).outcome else {
            return XCTFail("200 is a delivery")
        }
        for (status, reason) in [(400, "BadDeviceToken"), (410, "Unregistered"), (400, "DeviceTokenNotForTopic")] {
            XCTAssertEqual(outcome(status, reason).0?.classification, .tokenDead, reason)
            XCTAssertEqual(outcome(status, reason).0?.reason, reason)
        }
        XCTAssertEqual(outcome(410, "Unregistered").0?.message, "invalid since 1700000000000 ms")
        XCTAssertEqual(outcome(429, "TooManyRequests", retryAfter: "20").0?.classification, .retryable)
        XCTAssertEqual(outcome(429, "TooManyRequests", retryAfter: "20").0?.retryAfter, 20)
        XCTAssertEqual(outcome(503, "ServiceUnavailable").0?.classification, .retryable)
        XCTAssertEqual(outcome(500, nil).0?.reason, "http_500")
        XCTAssertEqual(outcome(413, "PayloadTooLarge").0?.reason, "too_big")
        for reason in ["ExpiredProviderToken", "InvalidProviderToken"] {
            let (failure, refused) = outcome(403, reason)
            XCTAssertEqual(failure?.classification, .ourFault, reason)
            XCTAssertTrue(refused, "renewing the provider token may cure \(reason)")
        }
        for (status, reason) in [(400, "BadTopic"), (400, "TopicDisallowed"), (403, "MissingProviderToken"), (400, "BadCollapseId")] {
            let (failure, refused) = outcome(status, reason)
            XCTAssertEqual(failure?.classification, .ourFault, reason)
            XCTAssertFalse(refused, reason)
        }
    }
}
