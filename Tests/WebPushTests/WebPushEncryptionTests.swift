import CompactJSON
import SSLCrypto
import WebPush
import XCTest

/// RFC 8291 Appendix A, with its line breaks removed.
private enum Example {
    static let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
    static let senderPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let senderPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let userAgentPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let userAgentPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let body = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
}

private func bytes(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> [UInt8] {
    try XCTUnwrap(Base64URL.decode(text), "not base64url: \(text)", file: file, line: line)
}

/// A private key from its scalar and its published uncompressed point.
private func privateKey(_ d: String, point: String) throws -> ECPrivateKey {
    let point = try bytes(point)
    return try ECPrivateKey(d: bytes(d), x: Array(point[1...32]), y: Array(point[33...64]))
}

final class WebPushEncryptionTests: XCTestCase {
    func testRFC8291AppendixAIsReproducedByteForByte() throws {
        let sender = try privateKey(Example.senderPrivate, point: Example.senderPublic)
        XCTAssertEqual(try sender.publicKey.uncompressedPoint, try bytes(Example.senderPublic))
        let body = try WebPushEncryption.encrypt(
            Example.plaintext, userAgentKey: ECPublicKey(uncompressedPoint: bytes(Example.userAgentPublic)),
            authSecret: bytes(Example.authSecret), senderKey: sender, salt: bytes(Example.salt))
        XCTAssertEqual(Base64URL.encode(body), Example.body)
        XCTAssertEqual(body.count, 144)
    }

    func testTheRFCExampleDecryptsWithTheBrowsersKeys() throws {
        let browser = try privateKey(Example.userAgentPrivate, point: Example.userAgentPublic)
        let plaintext = try WebPushEncryption.decrypt(bytes(Example.body), userAgentKey: browser, authSecret: bytes(Example.authSecret))
        XCTAssertEqual(plaintext, Example.plaintext)
    }

    func testEachMessageHasItsOwnKeyAndSaltAndDecryptsToWhatWasSent() throws {
        let browser = try ECPrivateKey()
        let auth = try SecureRandom.bytes(16)
        let message = Array(#"{"v":2,"t":"appid","p":"/users/1"}"#.utf8)
        let first = try WebPushEncryption.encrypt(message, userAgentKey: browser.publicKey, authSecret: auth)
        let second = try WebPushEncryption.encrypt(message, userAgentKey: browser.publicKey, authSecret: auth)
        XCTAssertNotEqual(Array(first[0..<16]), Array(second[0..<16]), "a fresh salt per message")
        XCTAssertNotEqual(Array(first[21..<86]), Array(second[21..<86]), "a fresh sender key per message")
        XCTAssertEqual(first.count, WebPushEncryption.headerByteCount + message.count + 1 + 16)
        XCTAssertEqual(Array(first[16..<21]), [0, 0, 0x10, 0, 65], "record size 4096, a 65-byte key id")
        XCTAssertEqual(try WebPushEncryption.decrypt(first, userAgentKey: browser, authSecret: auth), message)
        XCTAssertEqual(try WebPushEncryption.decrypt(second, userAgentKey: browser, authSecret: auth), message)
    }

    func testTheLargestMessageFitsA4096ByteBodyAndALargerOneIsRefused() throws {
        let browser = try ECPrivateKey()
        let auth = try SecureRandom.bytes(16)
        let largest = [UInt8](repeating: 0x61, count: 3993)
        XCTAssertEqual(WebPushEncryption.maximumPlaintextByteCount, 3993)
        let body = try WebPushEncryption.encrypt(largest, userAgentKey: browser.publicKey, authSecret: auth)
        XCTAssertEqual(body.count, 4096)
        XCTAssertEqual(try WebPushEncryption.decrypt(body, userAgentKey: browser, authSecret: auth), largest)
        XCTAssertThrowsError(try WebPushEncryption.encrypt(largest + [0x61], userAgentKey: browser.publicKey, authSecret: auth))
    }

    func testAnAlteredBodyOrOtherKeysDoNotDecrypt() throws {
        let browser = try privateKey(Example.userAgentPrivate, point: Example.userAgentPublic)
        let auth = try bytes(Example.authSecret)
        var altered = try bytes(Example.body)
        altered[100] ^= 1
        XCTAssertThrowsError(try WebPushEncryption.decrypt(altered, userAgentKey: browser, authSecret: auth))
        var otherAuth = auth
        otherAuth[0] ^= 1
        XCTAssertThrowsError(try WebPushEncryption.decrypt(bytes(Example.body), userAgentKey: browser, authSecret: otherAuth))
        XCTAssertThrowsError(try WebPushEncryption.decrypt(bytes(Example.body), userAgentKey: ECPrivateKey(), authSecret: auth))
        XCTAssertThrowsError(try WebPushEncryption.decrypt(Array(try bytes(Example.body).prefix(90)), userAgentKey: browser, authSecret: auth))
        XCTAssertThrowsError(try WebPushEncryption.decrypt([], userAgentKey: browser, authSecret: auth))
        XCTAssertThrowsError(try WebPushEncryption.encrypt(
            Example.plaintext, userAgentKey: browser.publicKey, authSecret: [1, 2, 3]))
    }

    func testAKeyThatIsNotAnUncompressedPointIsRefused() {
        XCTAssertThrowsError(try ECPublicKey(uncompressedPoint: [0x04] + [UInt8](repeating: 1, count: 64)))  // off the curve
        XCTAssertThrowsError(try ECPublicKey(uncompressedPoint: [0x02] + [UInt8](repeating: 1, count: 32)))  // compressed
        XCTAssertThrowsError(try ECPublicKey(uncompressedPoint: []))
    }
}

final class WebPushPrimitivesTests: XCTestCase {
    /// RFC 5869 Appendix A.1.
    func testHKDFRFC5869CaseOne() throws {
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        let salt: [UInt8] = Array(0x00...0x0c)
        let info: [UInt8] = Array(0xf0...0xf9)
        let prk = try HKDF.extract(salt: salt, inputKeyingMaterial: ikm)
        XCTAssertEqual(hex(prk), "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5")
        let okm = try HKDF.expand(pseudorandomKey: prk, info: info, length: 42)
        XCTAssertEqual(hex(okm), "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    }

    /// NIST GCM test case 2 (AES-128, zero key and IV, one zero block).
    func testAES128GCMKnownAnswer() throws {
        let sealed = try AES128GCM.seal([UInt8](repeating: 0, count: 16), key: [UInt8](repeating: 0, count: 16), iv: [UInt8](repeating: 0, count: 12))
        XCTAssertEqual(hex(sealed.ciphertext), "0388dace60b6a392f328c2b971b2fe78")
        XCTAssertEqual(hex(sealed.tag), "ab6e47d42cec13bdf53a67b21257bddf")
        XCTAssertThrowsError(try AES128GCM.seal([1], key: [UInt8](repeating: 0, count: 32), iv: [UInt8](repeating: 0, count: 12)))
    }

    func testES256SignaturesVerifyWithThePublicKeyOnly() throws {
        let key = try ECPrivateKey()
        let message = Array("header.claims".utf8)
        let signature = try key.signES256(message)
        XCTAssertEqual(signature.count, 64)
        XCTAssertTrue(key.publicKey.verifyES256(signature: signature, message: message))
        XCTAssertFalse(key.publicKey.verifyES256(signature: signature, message: message + [0x2e]))
        XCTAssertFalse(try ECPrivateKey().publicKey.verifyES256(signature: signature, message: message))
    }
}

final class VAPIDTests: XCTestCase {
    func testTheTokenIsAnES256JWTForThePushServicesOriginSignedByTheAppServersKey() throws {
        let key = try ECPrivateKey()
        let signer = try VAPIDSigner(key: key, subject: "mailto:ops@example.com")
        let audience = try XCTUnwrap(VAPIDSigner.audience(ofEndpoint: "https://push.example.net:8443/wpush/v2/abc?x=1"))
        XCTAssertEqual(audience, "https://push.example.net:8443")
        let header = try signer.authorization(audience: audience, expiresAt: 1_800_000_000)
        XCTAssertTrue(header.hasPrefix("vapid t="))
        let parts = header.dropFirst("vapid t=".count).components(separatedBy: ", k=")
        XCTAssertEqual(parts.count, 2)
        XCTAssertEqual(parts[1], Base64URL.encode(try key.publicKey.uncompressedPoint))
        let jwt = parts[0].split(separator: ".").map(String.init)
        XCTAssertEqual(jwt.count, 3)
        XCTAssertEqual(String(decoding: try bytes(jwt[0]), as: UTF8.self), #"{"typ":"JWT","alg":"ES256"}"#)
        XCTAssertEqual(
            String(decoding: try bytes(jwt[1]), as: UTF8.self),
            #"{"aud":"https://push.example.net:8443","exp":1800000000,"sub":"mailto:ops@example.com"}"#)
        let published = try ECPublicKey(uncompressedPoint: bytes(parts[1]))
        XCTAssertTrue(published.verifyES256(signature: try bytes(jwt[2]), message: Array("\(jwt[0]).\(jwt[1])".utf8)))
    }

    func testTheAudienceIsTheEndpointsOriginOrNothing() {
        XCTAssertEqual(VAPIDSigner.audience(ofEndpoint: "https://fcm.googleapis.com/fcm/send/abc"), "https://fcm.googleapis.com")
        XCTAssertEqual(VAPIDSigner.audience(ofEndpoint: "http://127.0.0.1:9000"), "http://127.0.0.1:9000")
        XCTAssertNil(VAPIDSigner.audience(ofEndpoint: "ftp://host/x"))
        XCTAssertNil(VAPIDSigner.audience(ofEndpoint: "https:///x"))
        XCTAssertNil(VAPIDSigner.audience(ofEndpoint: "https://user@host/x"))
        XCTAssertNil(VAPIDSigner.audience(ofEndpoint: "push.example.net/x"))
    }
}

private func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}
