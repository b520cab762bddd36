import SSLCrypto
import TestSupport
import XCTest

final class RSAKeyTests: XCTestCase {
    func testGeneratedKeyRoundTripsThroughPEMAndSigns() throws {
        let key = try RSAPrivateKey(generatingBits: 2048)
        XCTAssertEqual(key.modulusByteCount, 256)
        let pem = try key.pemRepresentation()
        XCTAssertTrue(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let reloaded = try RSAPrivateKey(pem: pem)
        let publicKey = try RSAPublicKey(pem: try key.publicKey.pemRepresentation())

        let message = Array("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0".utf8)
        let signature = try reloaded.signRS256(message)
        XCTAssertEqual(signature.count, 256)
        // PKCS#1 v1.5 signatures are deterministic.
        XCTAssertEqual(signature, try key.signRS256(message))
        XCTAssertTrue(publicKey.verifyRS256(signature: signature, message: message))
        XCTAssertFalse(publicKey.verifyRS256(signature: signature, message: message + [0]))
        var forged = signature
        forged[100] ^= 0x04
        XCTAssertFalse(publicKey.verifyRS256(signature: forged, message: message))
        XCTAssertFalse(publicKey.verifyRS256(signature: Array(signature.dropLast()), message: message))
        XCTAssertFalse(publicKey.verifyRS256(signature: [], message: message))
    }

    func testOAEPSHA256RoundTripAndRejection() throws {
        let key = try RSAPrivateKey(generatingBits: 2048)
        let cek = try SecureRandom.bytes(32)
        let encrypted = try key.publicKey.encryptOAEPSHA256(cek)
        XCTAssertEqual(encrypted.count, 256)
        XCTAssertNotEqual(encrypted, try key.publicKey.encryptOAEPSHA256(cek), "OAEP is randomised")
        XCTAssertEqual(try key.decryptOAEPSHA256(encrypted), cek)
        var tampered = encrypted
        tampered[7] ^= 0x01
        XCTAssertThrowsError(try key.decryptOAEPSHA256(tampered))
        XCTAssertThrowsError(try key.decryptOAEPSHA256(Array(encrypted.prefix(128))))
        let other = try RSAPrivateKey(generatingBits: 2048)
        XCTAssertThrowsError(try other.decryptOAEPSHA256(encrypted))
    }

    func testPEMFormatsFromPythonCryptography() throws {
        // PKCS#1 ("BEGIN RSA PRIVATE KEY") and PKCS#8 private keys, SubjectPublicKeyInfo public key,
        // and a 1024-bit key that must be refused.
        let results = try PythonInterop.jose.run([
            ["op": "rsa_generate", "bits": 2048, "format": "pkcs1"],
            ["op": "rsa_generate", "bits": 2048, "format": "pkcs8"],
            ["op": "rsa_generate", "bits": 1024, "format": "pkcs8"],
        ])
        guard let pkcs1 = PythonInterop.string(results[0], "private_pem"),
              let pkcs1Public = PythonInterop.string(results[0], "public_pem"),
              let pkcs8 = PythonInterop.string(results[1], "private_pem"),
              let small = PythonInterop.string(results[2], "private_pem"),
              let smallPublic = PythonInterop.string(results[2], "public_pem")
        else { return }
        XCTAssertTrue(pkcs1.hasPrefix("-----BEGIN RSA PRIVATE KEY-----"))
        XCTAssertTrue(pkcs8.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let fromPKCS1 = try RSAPrivateKey(pem: pkcs1)
        _ = try RSAPrivateKey(pem: pkcs8)
        let publicKey = try RSAPublicKey(pem: pkcs1Public)
        let message = Array("message".utf8)
        XCTAssertTrue(publicKey.verifyRS256(signature: try fromPKCS1.signRS256(message), message: message))
        XCTAssertThrowsError(try RSAPrivateKey(pem: small))
        XCTAssertThrowsError(try RSAPublicKey(pem: smallPublic))
    }

    func testMalformedPEMIsAnErrorWithOpenSSLDetails() {
        XCTAssertThrowsError(try RSAPrivateKey(pem: "not a key")) { error in
            XCTAssertTrue("\(error)".contains("RSAPrivateKey"), "\(error)")
        }
        XCTAssertThrowsError(try RSAPrivateKey(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")) { error in
            // The message carries OpenSSL's own error strings.
            XCTAssertTrue("\(error)".contains("error:"), "\(error)")
        }
        XCTAssertThrowsError(try RSAPublicKey(pem: ""))
    }
}
