import CompactJSON
import JOSE
import PushCore
import SSLCrypto
import XCTest

@testable import PushFormats

/// The device keys of v2 subscriptions (`encryption`): what is accepted, what is refused and why, and that a
/// device-encrypted payload opens with the device's key only.
final class DeviceKeyTests: XCTestCase {
    private func publicJWK(_ key: ECPrivateKey, kid: String? = nil) throws -> [ExactString: JSONValue] {
        let point = try key.publicKey.coordinates
        var jwk: [ExactString: JSONValue] = [
            "kty": .string("EC"), "crv": .string("P-256"), "x": .string(Base64URL.encode(point.x)), "y": .string(Base64URL.encode(point.y)),
        ]
        if let kid { jwk["kid"] = .string(kid) }
        return jwk
    }

    private func request(_ jwk: [ExactString: JSONValue], alg: String = "ECDH-ES+A256KW") -> JSONValue {
        .object(["alg": .string(alg), "jwk": .object(jwk)])
    }

    private func assertRefused(_ value: JSONValue, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try DeviceKey.parse(value), file: file, line: line) { error in
            XCTAssertTrue("\(error)".contains(expected), "\(error) does not say \(expected)", file: file, line: line)
        }
    }

    func testAcceptsP256AndRSAPublicKeys() throws {
        let device = try ECPrivateKey()
        var jwk = try publicJWK(device, kid: "phone-1")
        // What WebCrypto exports alongside the key is accepted and not kept.
        jwk["ext"] = .bool(true)
        jwk["key_ops"] = .array([])
        jwk["use"] = .string("enc")
        jwk["alg"] = .string("ECDH-ES+A256KW")
        let parsed = try DeviceKey.parse(request(jwk))
        XCTAssertEqual(parsed.algorithm, .ecdhESA256KW)
        XCTAssertEqual(parsed.kid, "phone-1")
        XCTAssertEqual(parsed.json, request(try publicJWK(device, kid: "phone-1")))
        XCTAssertEqual(DeviceEncryption.decode(parsed.json), parsed)
        XCTAssertNil(try DeviceKey.parse(request(try publicJWK(device))).kid)

        let rsa = try RSAPrivateKey(generatingBits: 2048)
        let pem = try rsa.publicKey.pemRepresentation()
        let (n, e) = try RSAComponents.of(pem: pem)
        let rsaKey = try DeviceKey.parse(
            request(["kty": .string("RSA"), "n": .string(Base64URL.encode(n)), "e": .string(Base64URL.encode(e))], alg: "RSA-OAEP-256"))
        XCTAssertEqual(rsaKey.algorithm, .rsaOAEP256)
        XCTAssertEqual(DeviceEncryption.decode(rsaKey.json), rsaKey)
        let sealer = try DeviceKey.jweKey(rsaKey)
        let token = try JWE.encrypt(payload: Array("hello".utf8), key: sealer)
        XCTAssertEqual(try JWE.decrypt(compact: token, keys: { _ in JWEKey.rsaOAEP256(kid: "x", privateKey: rsa) }), Array("hello".utf8))
    }

    func testRefusesBadKeysWithAClearMessage() throws {
        let device = try ECPrivateKey()
        let good = try publicJWK(device)
        func with(_ name: ExactString, _ value: JSONValue?) -> [ExactString: JSONValue] {
            var jwk = good
            jwk[name] = value
            return jwk
        }
        guard case .string(let y) = good["y"] ?? .null, var yBytes = Base64URL.decode(y) else { return XCTFail() }
        yBytes[31] ^= 1
        assertRefused(.string("key"), "'encryption' must be an object")
        assertRefused(.object(["jwk": .object(good)]), "'encryption.alg' is required")
        assertRefused(request(good, alg: "ECDH-ES"), "'encryption.alg' must be ECDH-ES+A256KW or RSA-OAEP-256")
        assertRefused(.object(["alg": .string("ECDH-ES+A256KW"), "jwk": .object(good), "extra": .null]), "unknown field 'extra'")
        assertRefused(.object(["alg": .string("ECDH-ES+A256KW")]), "'encryption.jwk' is required")
        assertRefused(request(with("d", .string("AAAA"))), "private key member 'd'")
        assertRefused(request(with("crv", .string("P-384"))), "'encryption.jwk.crv' must be 'P-256'")
        assertRefused(request(with("kty", .string("RSA"))), "'encryption.jwk.kty' must be 'EC'")
        assertRefused(request(with("x", nil)), "'encryption.jwk.x' is required")
        assertRefused(request(with("x", .string("AAAA"))), "'encryption.jwk.x' must hold 32 bytes for P-256, not 3")
        assertRefused(request(with("x", .string(Base64URL.encode([UInt8](repeating: 1, count: 33))))), "not 33")
        assertRefused(request(with("y", .string("not base64url!"))), "'encryption.jwk.y' is not valid base64url")
        assertRefused(request(with("y", .string(Base64URL.encode(yBytes)))), "the point (x, y) is not on the curve")
        assertRefused(request(with("use", .string("sig"))), "'encryption.jwk.use' must be 'enc'")
        assertRefused(request(with("alg", .string("RSA-OAEP-256"))), "'encryption.jwk.alg' is 'RSA-OAEP-256'")
        assertRefused(request(with("kid", .string(""))), "'encryption.jwk.kid' must be 1 to 128 bytes")
        assertRefused(request(with("kid", .number("1"))), "'encryption.jwk.kid' must be a string")
        assertRefused(request(with("n", .string("AQAB"))), "unexpected member 'n'")
        assertRefused(request(good, alg: "RSA-OAEP-256"), "'encryption.jwk.kty' must be 'RSA'")
        assertRefused(
            request(["kty": .string("RSA"), "n": .string(Base64URL.encode([UInt8](repeating: 0xC5, count: 128))), "e": .string("AQAB")],
                    alg: "RSA-OAEP-256"),
            "the modulus n must be 2048 to 16384 bits")
    }

    /// The payload of a device-encrypted subscription: `ECDH-ES+A256KW` for the device's key, the envelope's `kid`
    /// the device's (absent when it gave none); the app's key cannot open it, the device's key does.
    func testDevicePayloadOpensWithTheDeviceKeyOnly() throws {
        let device = try ECPrivateKey()
        let appKey = try JWEKey.a256kw(kid: "k1", kek: [UInt8](repeating: 7, count: 32))
        let path = DataPath(validatedSegments: ["users", "alice"])
        for kid in ["phone-1", nil] {
            let encryption = try DeviceKey.parse(request(try publicJWK(device, kid: kid)))
            let payload = try XCTUnwrap(
                V2Payload.build(app: "toto", path: path, subscriptionID: "sub", content: .value(.number("1")), key: try DeviceKey.jweKey(encryption)))
            let text = String(decoding: payload.jsonBytes(), as: UTF8.self)
            XCTAssertEqual(payload["kid"], kid)
            let header = try XCTUnwrap(payload["evt"]?.split(separator: ".").first)
            XCTAssertTrue(String(decoding: Base64URL.decode(header) ?? [], as: UTF8.self)
                .hasPrefix(#"{"alg":"ECDH-ES+A256KW","enc":"A256GCM","epk":{"kty":"EC","crv":"P-256","x":""#))

            let opener = JWEKey.ecdhESA256KW(kid: kid ?? "device", privateKey: device)
            let decoded = try PayloadDecoder.decodeEvent(payload: text, keys: [opener])
            XCTAssertEqual(decoded.event["v"], .number("1"))
            XCTAssertEqual(decoded.kid, kid)
            XCTAssertThrowsError(try PayloadDecoder.decodeEvent(payload: text, keys: [appKey]))
            // Another device's key of the same kid: the common "wrong key" answer.
            let stranger = JWEKey.ecdhESA256KW(kid: kid ?? "device", privateKey: try ECPrivateKey())
            XCTAssertThrowsError(try PayloadDecoder.decodeEvent(payload: text, keys: [stranger])) { error in
                XCTAssertEqual(error as? PayloadDecodingError, .wrongKey)
            }
        }
    }

    /// `push-gateway decode` reads a device's private key as a JWK with `d` (alg optional) or as a PEM.
    func testKeyFileReadsADevicePrivateKey() throws {
        let generated = try ECPrivateKey()
        let pem = try generated.pemRepresentation()
        let fromPEM = try KeyFile.load(text: pem, kid: "phone")
        XCTAssertEqual(fromPEM.map(\.algorithm), [.ecdhESA256KW])
        let sealed = try JWE.encrypt(payload: Array("x".utf8), key: .ecdhESA256KW(kid: "phone", publicKey: generated.publicKey))
        XCTAssertEqual(try JWE.decrypt(compact: sealed, keys: { _ in fromPEM.first }), Array("x".utf8))

        // RFC 7518 Appendix C's Bob: a JWK with d, no alg.
        let bob = #"{"kty":"EC","crv":"P-256","x":"weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ","y":"e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck","d":"VEmDZpDXXK8p8N0Cndsxs924q6nS1RXFASRl6BfUqdw"}"#
        let loaded = try KeyFile.load(text: bob, kid: "bob")
        XCTAssertEqual(loaded.map(\.kid), ["bob"])
        let bobPublic = try ECPublicKey(x: Base64URL.decode("weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ") ?? [],
                                        y: Base64URL.decode("e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck") ?? [])
        let toBob = try JWE.encrypt(payload: Array("y".utf8), key: .ecdhESA256KW(kid: "", publicKey: bobPublic))
        XCTAssertEqual(try JWE.decrypt(compact: toBob, keys: { _ in loaded.first }), Array("y".utf8))
        // The public half alone cannot decrypt.
        let publicOnly = #"{"kty":"EC","crv":"P-256","x":"weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ","y":"e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck"}"#
        XCTAssertThrowsError(try KeyFile.load(text: publicOnly, kid: "bob")) { error in
            XCTAssertTrue("\(error)".contains("field \"d\" is missing"), "\(error)")
        }
    }
}

/// `n` and `e` of an RSA SubjectPublicKeyInfo PEM, read from its DER (the last two INTEGERs).
enum RSAComponents {
    struct Failure: Error {}

    static func of(pem: String) throws -> (n: [UInt8], e: [UInt8]) {
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let der = Base64URL.decode(body.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: ""))
        else { throw Failure() }
        var integers: [[UInt8]] = []
        var index = 0
        while index + 1 < der.count {
            let tag = der[index]
            var length = Int(der[index + 1])
            index += 2
            if length & 0x80 != 0 {
                let count = length & 0x7F
                length = 0
                for _ in 0..<count {
                    length = length << 8 | Int(der[index])
                    index += 1
                }
            }
            switch tag {
            case 0x30: continue
            case 0x03: index += 1
            case 0x02:
                var integer = Array(der[index..<index + length])
                while integer.first == 0 { integer.removeFirst() }
                integers.append(integer)
                index += length
            default: index += length
            }
        }
        guard integers.count >= 2 else { throw Failure() }
        return (integers[integers.count - 2], integers[integers.count - 1])
    }
}
