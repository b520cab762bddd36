import Foundation
import CompactJSON
import JOSE
import SSLCrypto
import XCTest

/// `ECDH-ES+A256KW` (RFC 7518 §4.6): the Concat KDF and ECDH against RFC 7518 Appendix C, the JWE both ways,
/// and the checks on P-256 keys (on the curve, right size).
final class ECDHTests: XCTestCase {
    // RFC 7518 Appendix C: Alice's ephemeral key, Bob's key, Z, and the derived key for A128GCM.
    private let alice = (d: "0_NxaRPUMQoAJt50Gz8YiTr8gRTwyEaCumd-MToTmIo", x: "gI0GAILBdu7T53akrFmMyGcsF3n5dO7MmwNBHKW5SV0",
                         y: "SLW_xSffzlPWrHEVI30DHM_4egVwt3NQqeUD7nMFpps")
    private let bob = (d: "VEmDZpDXXK8p8N0Cndsxs924q6nS1RXFASRl6BfUqdw", x: "weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ",
                       y: "e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck")
    private let appendixCZ: [UInt8] = [
        158, 86, 217, 29, 129, 113, 53, 211, 114, 131, 66, 131, 191, 132, 38, 156, 251, 49, 110, 163, 218, 128, 106, 72, 246,
        218, 167, 121, 140, 254, 144, 196,
    ]

    func testConcatKDFAgainstRFC7518AppendixC() throws {
        let key = try ConcatKDF.sha256(
            z: appendixCZ, algorithmID: "A128GCM", partyUInfo: Array("Alice".utf8), partyVInfo: Array("Bob".utf8), keyBits: 128)
        XCTAssertEqual(key, [86, 170, 141, 234, 248, 35, 109, 32, 92, 34, 40, 205, 113, 167, 16, 26])
        XCTAssertEqual(Base64URL.encode(key), "VqqN6vgjbSBcIijNcacQGg")
        // Longer than one SHA-256 output: rounds 1 and 2 of SHA-256(counter || Z || OtherInfo), by hand.
        let otherInfo: [UInt8] = [0, 0, 0, 14] + Array("ECDH-ES+A256KW".utf8) + [0, 0, 0, 0] + [0, 0, 0, 0] + [0, 0, 2, 0]
        let long = try ConcatKDF.sha256(z: appendixCZ, algorithmID: "ECDH-ES+A256KW", keyBits: 512)
        XCTAssertEqual(long, SHA256.hash([0, 0, 0, 1] + appendixCZ + otherInfo) + SHA256.hash([0, 0, 0, 2] + appendixCZ + otherInfo))
        XCTAssertThrowsError(try ConcatKDF.sha256(z: appendixCZ, algorithmID: "A128GCM", keyBits: 7))
    }

    func testECDHAgainstRFC7518AppendixC() throws {
        let alicePrivate = try ECPrivateKey(d: b64(alice.d), x: b64(alice.x), y: b64(alice.y))
        let bobPublic = try ECPublicKey(x: b64(bob.x), y: b64(bob.y))
        XCTAssertEqual(try alicePrivate.sharedSecret(with: bobPublic), appendixCZ)
        // And from Bob's side.
        let bobPrivate = try ECPrivateKey(d: b64(bob.d), x: b64(bob.x), y: b64(bob.y))
        XCTAssertEqual(try bobPrivate.sharedSecret(with: try ECPublicKey(x: b64(alice.x), y: b64(alice.y))), appendixCZ)
        let coordinates = try alicePrivate.publicKey.coordinates
        XCTAssertEqual(Base64URL.encode(coordinates.x), alice.x)
        XCTAssertEqual(Base64URL.encode(coordinates.y), alice.y)
    }

    func testPublicKeyChecks() throws {
        let x = b64(bob.x), y = b64(bob.y)
        var offCurve = y
        offCurve[31] ^= 1
        XCTAssertThrowsError(try ECPublicKey(x: x, y: offCurve)) { error in
            XCTAssertTrue("\(error)".contains("not on the curve"), "\(error)")
        }
        XCTAssertThrowsError(try ECPublicKey(x: Array(x.dropFirst()), y: y)) { error in
            XCTAssertTrue("\(error)".contains("32 bytes"), "\(error)")
        }
        XCTAssertThrowsError(try ECPublicKey(x: [0] + x, y: y))
        XCTAssertThrowsError(try ECPublicKey(x: [UInt8](repeating: 0, count: 32), y: [UInt8](repeating: 0, count: 32)))
        // A coordinate not below the field prime p.
        XCTAssertThrowsError(try ECPublicKey(x: [UInt8](repeating: 0xFF, count: 32), y: y))
        // A private key whose d is not the one of (x, y).
        XCTAssertThrowsError(try ECPrivateKey(d: b64(alice.d), x: x, y: y))
    }

    func testEncryptsToTheDeviceKeyAlone() throws {
        let device = try ECPrivateKey()
        let other = try ECPrivateKey()
        let payload = Array(#"{"t":"v","m":"value","a":"toto","v":{"a":1},"s":"OK","p":"/a","id":"x"}"#.utf8)
        for kid in ["device-1", ""] {
            let key = JWEKey.ecdhESA256KW(kid: kid, publicKey: device.publicKey)
            let first = try JWE.encrypt(payload: payload, key: key)
            let second = try JWE.encrypt(payload: payload, key: key)
            XCTAssertEqual(first.utf8.count, JWE.compactLength(payloadLength: payload.count, key: key))
            XCTAssertEqual(first.utf8.count, JWE.compactLength(payloadLength: payload.count, alg: .ecdhESA256KW, kid: kid))
            let parts = first.split(separator: ".", omittingEmptySubsequences: false)
            XCTAssertEqual(parts.count, 5)
            XCTAssertEqual(b64(String(parts[1])).count, 40)
            guard case .object(let header) = try JSONParser.parse(b64(String(parts[0]))),
                  case .object(let epk)? = header["epk"]
            else { return XCTFail("no epk in \(parts[0])") }
            XCTAssertEqual(header["alg"], .string("ECDH-ES+A256KW"))
            XCTAssertEqual(header["enc"], .string("A256GCM"))
            XCTAssertEqual(header["kid"], kid.isEmpty ? nil : .string(kid))
            XCTAssertEqual(Set(header.keys.map(\.string)), kid.isEmpty ? ["alg", "enc", "epk"] : ["alg", "enc", "epk", "kid"])
            XCTAssertEqual(Set(epk.keys.map(\.string)), ["kty", "crv", "x", "y"])
            // A fresh ephemeral key per message.
            XCTAssertNotEqual(first.prefix { $0 != "." }, second.prefix { $0 != "." })

            let opener = JWEKey.ecdhESA256KW(kid: kid.isEmpty ? "any" : kid, privateKey: device)
            XCTAssertEqual(try JWE.decrypt(compact: first, keys: { _ in opener }), payload)
            XCTAssertEqual(try JWE.decrypt(compact: second, keys: { _ in opener }), payload)
            let wrong = JWEKey.ecdhESA256KW(kid: "other", privateKey: other)
            XCTAssertThrowsError(try JWE.decrypt(compact: first, keys: { _ in wrong })) { error in
                XCTAssertEqual("\(error)", "JWE: decryption failed")
            }
            // A public key cannot decrypt.
            XCTAssertThrowsError(try JWE.decrypt(compact: first, keys: { _ in key }))
        }
    }

    func testRefusesABadEphemeralKey() throws {
        let device = try ECPrivateKey()
        let key = JWEKey.ecdhESA256KW(kid: "d", publicKey: device.publicKey)
        let token = try JWE.encrypt(payload: Array("hi".utf8), key: key)
        var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let header = String(decoding: b64(parts[0]), as: UTF8.self)
        guard case .object(let members) = try JSONParser.parse(header), case .object(let epk)? = members["epk"],
              case .string(let y)? = epk["y"]
        else { return XCTFail("no epk") }
        var badY = b64(y)
        badY[31] ^= 1
        parts[0] = Base64URL.encode(Array(header.replacingOccurrences(of: y, with: Base64URL.encode(badY)).utf8))
        let opener = JWEKey.ecdhESA256KW(kid: "d", privateKey: device)
        XCTAssertThrowsError(try JWE.decrypt(compact: parts.joined(separator: "."), keys: { _ in opener })) { error in
            XCTAssertTrue("\(error)".contains("epk"), "\(error)")
        }
    }

    func testRSAPublicKeyFromModulusAndExponent() throws {
        let rsa = try RSAPrivateKey(generatingBits: 2048)
        let pem = try rsa.publicKey.pemRepresentation()
        // n and e from the DER of the PEM would need an ASN.1 reader: the round trip goes through a JWE instead.
        let modulusAndExponent = try PythonlessRSA.components(pem: pem)
        let key = try RSAPublicKey(modulus: modulusAndExponent.n, exponent: modulusAndExponent.e)
        XCTAssertEqual(try key.pemRepresentation(), pem)
        XCTAssertThrowsError(try RSAPublicKey(modulus: Array(modulusAndExponent.n.prefix(128)), exponent: [1, 0, 1]))
        XCTAssertThrowsError(try RSAPublicKey(modulus: modulusAndExponent.n, exponent: [1]))
        XCTAssertThrowsError(try RSAPublicKey(modulus: modulusAndExponent.n, exponent: [1, 0, 0]))
    }
}

/// `n` and `e` of an RSA SubjectPublicKeyInfo PEM, read from its DER (two INTEGERs inside a BIT STRING).
enum PythonlessRSA {
    struct Failure: Error {}

    static func components(pem: String) throws -> (n: [UInt8], e: [UInt8]) {
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let der = Data(base64Encoded: body).map(Array.init) else { throw Failure() }
        // The last two INTEGERs of the structure are n and e.
        var integers: [[UInt8]] = []
        var index = 0
        while index < der.count {
            let tag = der[index]
            index += 1
            guard index < der.count else { break }
            var length = Int(der[index])
            index += 1
            if length & 0x80 != 0 {
                let count = length & 0x7F
                length = 0
                for _ in 0..<count {
                    length = length << 8 | Int(der[index])
                    index += 1
                }
            }
            switch tag {
            case 0x30: continue  // SEQUENCE: descend
            case 0x03: index += 1  // BIT STRING: skip the unused-bits byte, descend
            case 0x02:
                integers.append(Array(der[index..<index + length]))
                index += length
            default: index += length
            }
        }
        guard integers.count >= 2 else { throw Failure() }
        return (integers[integers.count - 2], integers[integers.count - 1])
    }
}
