import SSLCrypto
import XCTest

@testable import Providers

/// A user notification's TTL and collapse key in the FCM and HMS request bodies (``DeliveryOptions``), byte-exact.
final class DeliveryOptionsEncodingTests: XCTestCase {
    private let data = Array(#"{"k":"v"}"#.utf8)
    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    func testFCMWithoutOptionsKeepsTheDocumentedBytes() {
        XCTAssertEqual(
            text(FCMMessageEncoder.encodeMessage(token: "t", dataJSON: data, options: .none, now: 1_767_225_600)),
            text(FCMMessageEncoder.encodeMessage(token: "t", dataJSON: data)))
        XCTAssertEqual(
            text(FCMMessageEncoder.encodeMessage(token: "t", dataJSON: data)),
            #"{"message":{"token":"t","data":{"k":"v"},"android":{"priority":"high"},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1}}}}}"#)
    }

    func testFCMWithTTLAndCollapseKey() {
        let body = FCMMessageEncoder.encodeMessage(
            token: "t", dataJSON: data, options: DeliveryOptions(ttlSeconds: 3600, collapseKey: "room-\"1\""), now: 1_767_225_600)
        XCTAssertEqual(
            text(body),
            #"{"message":{"token":"t","data":{"k":"v"},"android":{"priority":"high","ttl":"3600s","collapse_key":"room-\"1\""},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5","apns-expiration":"1767229200","apns-collapse-id":"room-\"1\""},"payload":{"aps":{"content-available":1}}}}}"#)
    }

    func testFCMTTLZeroIsAPNsExpirationZeroAndEachOptionAlone() {
        XCTAssertEqual(
            text(FCMMessageEncoder.encodeMessage(token: "t", dataJSON: data, options: DeliveryOptions(ttlSeconds: 0), now: 1_767_225_600)),
            #"{"message":{"token":"t","data":{"k":"v"},"android":{"priority":"high","ttl":"0s"},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5","apns-expiration":"0"},"payload":{"aps":{"content-available":1}}}}}"#)
        XCTAssertEqual(
            text(FCMMessageEncoder.encodeMessage(token: "t", dataJSON: data, options: DeliveryOptions(collapseKey: "k"), now: 1)),
            #"{"message":{"token":"t","data":{"k":"v"},"android":{"priority":"high","collapse_key":"k"},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5","apns-collapse-id":"k"},"payload":{"aps":{"content-available":1}}}}}"#)
    }

    func testAPNsCollapseIDOver64BytesIsTheKeysHash() {
        let exact = String(repeating: "é", count: 32)  // 64 bytes: kept
        XCTAssertEqual(FCMMessageEncoder.apnsCollapseID(exact), exact)
        let long = String(repeating: "a", count: 65)
        let hashed = FCMMessageEncoder.apnsCollapseID(long)
        XCTAssertEqual(hashed, Base64URL.encode(SHA256.hash(Array(long.utf8))))
        XCTAssertEqual(hashed.utf8.count, 43)
        XCTAssertNotEqual(hashed, FCMMessageEncoder.apnsCollapseID(long + "b"))
        let body = text(FCMMessageEncoder.encodeMessage(token: "t", dataJSON: data, options: DeliveryOptions(collapseKey: long)))
        // Android gets the key itself, APNs its hash.
        XCTAssertTrue(body.contains(#""collapse_key":"\#(long)""#))
        XCTAssertTrue(body.contains(#""apns-collapse-id":"\#(hashed)""#))
    }

    func testHMSWithoutOptionsKeepsTheDocumentedBytes() {
        XCTAssertEqual(
            text(HMSMessageEncoder.encodeMessage(token: "t", dataJSON: data, options: .none)),
            #"{"validate_only":false,"message":{"data":"{\"k\":\"v\"}","android":{"urgency":"HIGH"},"token":["t"]}}"#)
    }

    func testHMSWithTTLAndANumericCollapseKey() {
        XCTAssertEqual(
            text(HMSMessageEncoder.encodeMessage(token: "t", dataJSON: data, options: DeliveryOptions(ttlSeconds: 3600, collapseKey: "7"))),
            #"{"validate_only":false,"message":{"data":"{\"k\":\"v\"}","android":{"urgency":"HIGH","ttl":"3600s","collapse_key":7},"token":["t"]}}"#)
        // Another key is not sent; a TTL over 15 days is sent as 15 days.
        XCTAssertEqual(
            text(HMSMessageEncoder.encodeMessage(token: "t", dataJSON: data, options: DeliveryOptions(ttlSeconds: 2_419_200, collapseKey: "room-1"))),
            #"{"validate_only":false,"message":{"data":"{\"k\":\"v\"}","android":{"urgency":"HIGH","ttl":"1296000s"},"token":["t"]}}"#)
        XCTAssertEqual(
            text(HMSMessageEncoder.encodeMessage(token: "t", dataJSON: data, options: DeliveryOptions(collapseKey: "-1"))),
            #"{"validate_only":false,"message":{"data":"{\"k\":\"v\"}","android":{"urgency":"HIGH","collapse_key":-1},"token":["t"]}}"#)
    }

    func testHMSCollapseKeyMapping() {
        for (key, expected) in [("0", 0), ("100", 100), ("-1", -1), ("42", 42)] {
            XCTAssertEqual(HMSMessageEncoder.hmsCollapseKey(key), expected, key)
        }
        for key in ["101", "-2", "+5", "007", "-0", "1.0", " 1", "a", "", "99999999999999999999999"] {
            XCTAssertNil(HMSMessageEncoder.hmsCollapseKey(key), key)
        }
    }
}
