import CompactJSON
import XCTest

@testable import PushCore

/// A v2 subscription's device key in the state topic (so a new owner keeps encrypting), in the retries (so a
/// revoke sent after the subscription is gone is still encrypted), and in the byte estimate.
final class DeviceEncryptionTests: XCTestCase {
    // RFC 7518 Appendix C, Bob's public key.
    private let key = DeviceEncryption(
        algorithm: .ecdhESA256KW, kid: "phone-1",
        key: .p256(x: "weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ", y: "e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck"))!

    func testShapeChecks() {
        XCTAssertNil(DeviceEncryption(algorithm: .ecdhESA256KW, kid: nil, key: .p256(x: "short", y: "e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck")))
        XCTAssertNil(DeviceEncryption(algorithm: .rsaOAEP256, kid: nil, key: key.key))
        XCTAssertNil(DeviceEncryption(algorithm: .ecdhESA256KW, kid: "", key: key.key))
        XCTAssertNil(DeviceEncryption(algorithm: .rsaOAEP256, kid: nil, key: .rsa(n: "a+b", e: "AQAB")))
        XCTAssertNotNil(DeviceEncryption(algorithm: .rsaOAEP256, kid: nil, key: .rsa(n: "abc", e: "AQAB")))
        // The state topic's form refuses anything but the public key.
        guard case .object(var members) = key.json, case .object(var jwk)? = members["jwk"] else { return XCTFail() }
        jwk["d"] = .string("VEmDZpDXXK8p8N0Cndsxs924q6nS1RXFASRl6BfUqdw")
        members["jwk"] = .object(jwk)
        XCTAssertNil(DeviceEncryption.decode(.object(members)))
        XCTAssertEqual(DeviceEncryption.decode(key.json), key)
    }

    func testSubscriptionRecordKeepsTheDeviceKey() throws {
        let subscriber = SubscriberKey(token: "fcm-token", uid: "alice")
        let settings = SubscriptionSettings(mode: .value, format: .v2, expiresAt: 1_767_225_600, authUID: "alice", encryption: key)
        let record = SubscriptionRecord(app: "toto", subscription: Subscription(path: try DataPath("/a"), subscriber: subscriber, settings: settings))
        let value = String(decoding: try XCTUnwrap(record.value), as: UTF8.self)
        XCTAssertEqual(
            value,
            #"{"authUID":"alice","encryption":{"alg":"ECDH-ES+A256KW","jwk":{"crv":"P-256","kid":"phone-1","kty":"EC","#
                + #""x":"weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ","y":"e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck"}},"#
                + #""expiresAt":1767225600,"format":"v2","mode":"value"}"#)
        let decoded = try SubscriptionRecord.decode(key: record.key, value: record.value)
        XCTAssertEqual(decoded, record)
        XCTAssertEqual(decoded.settings?.encryption, key)
        // A key that changes is a change of the settings.
        var other = settings
        other.encryption = nil
        XCTAssertNotEqual(other, settings)

        let broken = Array(value.replacingOccurrences(of: #""kty":"EC""#, with: #""kty":"OKP""#).utf8)
        XCTAssertThrowsError(try SubscriptionRecord.decode(key: record.key, value: broken))
    }

    func testRetriesKeepTheDeviceKey() throws {
        let path = try DataPath("/a")
        let subscriber = SubscriberKey(token: "t", uid: "alice")
        let entries = [
            PendingNotification(app: "toto", path: path, subscriber: subscriber, format: .v2, encryption: key, content: .revoke(.expired),
                                firstFailureAt: 10),
            PendingNotification(app: "toto", path: path, subscriber: subscriber, format: .v2, content: .noData, firstFailureAt: 11),
        ]
        let record = RetryRecord(key: RetryKey(app: "toto", path: path, subscriber: subscriber), entries: entries)
        let decoded = try XCTUnwrap(try RetryRecord.decode(key: record.recordKey, value: record.value))
        XCTAssertEqual(decoded, record)
        XCTAssertEqual(decoded.entries.map(\.encryption), [key, nil])
    }

    /// The key's bytes (and the box that holds it in the settings) are predicted, counted, replaced and given
    /// back with its subscription.
    func testDeviceKeyBytesAreCounted() throws {
        let index = AppIndex(app: "a")
        let path = try DataPath("/users/alice")
        let subscriber = SubscriberKey(token: "fcm-token-of-more-than-fifteen-bytes", uid: "alice")
        let plain = SubscriptionSettings(mode: .noData, format: .v2, expiresAt: .max, authUID: "alice")
        var keyed = plain
        keyed.encryption = key
        XCTAssertGreaterThan(key.heapBytes, 150)

        // The prediction of a create holds the key's bytes on top of the rest (the rest is checked in StateBytesTests).
        let probe = AppIndex(app: "a")
        XCTAssertEqual(
            probe.bytesToSubscribe(path: path, subscriber: subscriber, settings: keyed)
                - probe.bytesToSubscribe(path: path, subscriber: subscriber, settings: plain),
            key.heapBytes + keyed.extraBytes)
        XCTAssertEqual(plain.extraBytes, 0)

        let empty = index.byteCount
        index.subscribe(path: path, subscriber: subscriber, settings: keyed)
        XCTAssertGreaterThan(index.byteCount - empty, key.heapBytes)
        XCTAssertEqual(index.bytesToSubscribe(path: path, subscriber: subscriber, settings: keyed), 0, "the same key again adds nothing")
        // Dropping the key gives its bytes back; adding it again is predicted as its bytes.
        let withKey = index.byteCount
        index.subscribe(path: path, subscriber: subscriber, settings: plain)
        XCTAssertEqual(withKey - index.byteCount, key.heapBytes + keyed.extraBytes)
        XCTAssertEqual(index.bytesToSubscribe(path: path, subscriber: subscriber, settings: keyed), key.heapBytes + keyed.extraBytes)
        index.subscribe(path: path, subscriber: subscriber, settings: keyed)
        XCTAssertEqual(index.byteCount, withKey)
        index.unsubscribe(path: path, subscriber: subscriber)
        XCTAssertLessThan(index.byteCount - empty, 1024, "only the dictionaries' grown capacity is left")
    }

    /// Matching hands the device key to the notification.
    func testMatchingCarriesTheKey() throws {
        let index = AppIndex(app: "a")
        let path = try DataPath("/a")
        let subscriber = SubscriberKey(token: "t", uid: "u")
        index.subscribe(path: path, subscriber: subscriber, settings: SubscriptionSettings(mode: .noData, format: .v2, expiresAt: .max, encryption: key))
        let revokes = index.revocations(of: index.allSubscriptions(), reason: .expired)
        XCTAssertEqual(revokes.first?.recipients.first?.encryption, key)
    }
}
