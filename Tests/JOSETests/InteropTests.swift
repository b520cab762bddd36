import Foundation
import JOSE
import SSLCrypto
import TestSupport
import XCTest

/// Interop with independent implementations (Python joserfc, jwcrypto, pyjwt, cryptography) through
/// `tests/interop/jose_interop.py`. Skipped only when python3 or those modules are missing.
final class InteropTests: XCTestCase {
    private static let libraries = ["joserfc", "jwcrypto"]

    /// One key per algorithm, with its JSON description for the Python side.
    private struct KeyCase {
        let key: JWEKey
        let pythonPrivate: [String: Any]  // what decrypts
        let pythonPublic: [String: Any]   // what encrypts
    }

    private func keyCases() throws -> [KeyCase] {
        let dir = try SecureRandom.bytes(32), kek = try SecureRandom.bytes(32)
        let rsa = try RSAPrivateKey(generatingBits: 2048)
        let rsaPrivate: [String: Any] = ["kty": "RSA", "pem": try rsa.pemRepresentation()]
        let rsaPublic: [String: Any] = ["kty": "RSA", "pem": try rsa.publicKey.pemRepresentation()]
        return [
            KeyCase(key: try .dir(kid: "dir-key", key: dir),
                    pythonPrivate: ["kty": "oct", "k": Base64URL.encode(dir)], pythonPublic: ["kty": "oct", "k": Base64URL.encode(dir)]),
            KeyCase(key: try .a256kw(kid: "kw \"key\" é😀\u{7f}", kek: kek),
                    pythonPrivate: ["kty": "oct", "k": Base64URL.encode(kek)], pythonPublic: ["kty": "oct", "k": Base64URL.encode(kek)]),
            KeyCase(key: .rsaOAEP256(kid: "rsa-key", privateKey: rsa), pythonPrivate: rsaPrivate, pythonPublic: rsaPublic),
        ]
    }

    private let payloads: [[UInt8]] = [
        [],
        Array("x".utf8),
        Array(#"{"t":"v","m":"value","a":"toto","v":{"name":"Zoë ✓","n":[1,2,3]},"s":"OK","p":"/some/webcom/path","id":"sub-1"}"#.utf8),
        (0..<1024).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) },
    ]

    func testLibrariesDecryptWhatJOSEEncrypts() throws {
        var ops: [[String: Any]] = []
        var expected: [(JWEKey, [UInt8])] = []
        for keyCase in try keyCases() {
            for payload in payloads {
                let token = try JWE.encrypt(payload: payload, key: keyCase.key)
                // jwcrypto 1.6 cannot decrypt an empty payload at all, not even its own; joserfc can.
                for library in Self.libraries where !(library == "jwcrypto" && payload.isEmpty) {
                    ops.append(["op": "decrypt", "lib": library, "token": token, "key": keyCase.pythonPrivate])
                    expected.append((keyCase.key, payload))
                }
            }
        }
        let results = try PythonInterop.jose.run(ops)
        for (index, result) in results.enumerated() {
            let (key, payload) = expected[index]
            let context = "\(ops[index]["lib"] ?? "") \(key.algorithm.rawValue) \(payload.count) bytes"
            guard let decrypted = PythonInterop.string(result, "payload") else { continue }
            XCTAssertEqual(Base64URL.decode(decrypted), payload, context)
            let header = result["header"] as? [String: String]
            XCTAssertEqual(header, ["alg": key.algorithm.rawValue, "enc": "A256GCM", "kid": key.kid], context)
        }
    }

    func testJOSEDecryptsWhatLibrariesEncrypt() throws {
        let cases = try keyCases()
        var ops: [[String: Any]] = []
        var expected: [(JWEKey, [UInt8])] = []
        for keyCase in cases {
            for payload in payloads {
                for library in Self.libraries {
                    ops.append(["op": "encrypt", "lib": library, "alg": keyCase.key.algorithm.rawValue,
                                "kid": keyCase.key.kid, "key": keyCase.pythonPublic, "payload": Base64URL.encode(payload)])
                    expected.append((keyCase.key, payload))
                }
            }
        }
        let results = try PythonInterop.jose.run(ops)
        let byKid = Dictionary(uniqueKeysWithValues: cases.map { ($0.key.kid, $0.key) })
        for (index, result) in results.enumerated() {
            let (key, payload) = expected[index]
            let context = "\(ops[index]["lib"] ?? "") \(key.algorithm.rawValue) \(payload.count) bytes"
            guard let token = PythonInterop.string(result, "token") else { continue }
            XCTAssertEqual(try JWE.decrypt(compact: token, keys: { $0.flatMap { byKid[$0] } }), payload, context)
            XCTAssertEqual(try JOSE.decode(compact: token, keys: { $0.flatMap { byKid[$0] } }), payload, context)
            // joserfc writes exactly our protected header (jwcrypto adds spaces after ':' and ','), so its
            // output has exactly the length we compute for ours.
            if ops[index]["lib"] as? String == "joserfc" {
                let ours = try JWE.encrypt(payload: payload, key: key)
                XCTAssertEqual(token.prefix { $0 != "." }, ours.prefix { $0 != "." }, context)
                XCTAssertEqual(token.utf8.count, JWE.compactLength(payloadLength: payload.count, key: key), context)
            }
        }
    }

    /// `ECDH-ES+A256KW` on P-256 both ways: device keys drawn by joserfc (so their JWK import is tested too),
    /// with and without a kid.
    func testECDHESBothWays() throws {
        let generated = try PythonInterop.jose.run([["op": "ec_generate"], ["op": "ec_generate"]])
        var ops: [[String: Any]] = []
        var expected: [(kid: String, opener: JWEKey, payload: [UInt8])] = []
        for (index, result) in generated.enumerated() {
            guard let jwk = result["jwk"] as? [String: String], let d = jwk["d"], let x = jwk["x"], let y = jwk["y"] else {
                return XCTFail("ec_generate: \(result)")
            }
            let kid = index == 0 ? "device-key" : ""
            let privateKey = try ECPrivateKey(d: b64(d), x: b64(x), y: b64(y))
            let opener = JWEKey.ecdhESA256KW(kid: kid, privateKey: privateKey)
            let sealer = JWEKey.ecdhESA256KW(kid: kid, publicKey: try ECPublicKey(x: b64(x), y: b64(y)))
            var publicJWK = jwk
            publicJWK["d"] = nil
            for payload in payloads {
                let token = try JWE.encrypt(payload: payload, key: sealer)
                XCTAssertEqual(token.utf8.count, JWE.compactLength(payloadLength: payload.count, key: sealer))
                for library in Self.libraries where !(library == "jwcrypto" && payload.isEmpty) {
                    ops.append(["op": "decrypt", "lib": library, "token": token, "key": ["kty": "EC", "jwk": jwk]])
                    expected.append((kid, opener, payload))
                    var encrypt: [String: Any] = [
                        "op": "encrypt", "lib": library, "alg": "ECDH-ES+A256KW", "key": ["kty": "EC", "jwk": publicJWK],
                        "payload": Base64URL.encode(payload),
                    ]
                    if !kid.isEmpty { encrypt["kid"] = kid }
                    ops.append(encrypt)
                    expected.append((kid, opener, payload))
                }
            }
        }
        let results = try PythonInterop.jose.run(ops)
        for (index, result) in results.enumerated() {
            let (kid, opener, payload) = expected[index]
            let context = "\(ops[index]["op"] ?? "") \(ops[index]["lib"] ?? "") kid '\(kid)' \(payload.count) bytes"
            if ops[index]["op"] as? String == "decrypt" {
                guard let decrypted = PythonInterop.string(result, "payload") else { continue }
                XCTAssertEqual(Base64URL.decode(decrypted), payload, context)
                let header = result["header"] as? [String: Any]
                XCTAssertEqual(header?["alg"] as? String, "ECDH-ES+A256KW", context)
                XCTAssertEqual(header?["kid"] as? String, kid.isEmpty ? nil : kid, context)
                XCTAssertEqual((header?["epk"] as? [String: String])?["crv"], "P-256", context)
            } else {
                guard let token = PythonInterop.string(result, "token") else { continue }
                XCTAssertEqual(try JWE.decrypt(compact: token, keys: { _ in opener }), payload, context)
            }
        }
    }

    func testUnsecuredJWSBothWays() throws {
        var ops: [[String: Any]] = []
        for payload in payloads.dropFirst(2) {
            let token = JWS.unsecured(payload: payload)
            for library in Self.libraries + ["pyjwt"] where library != "pyjwt" || payload.first == UInt8(ascii: "{") {
                ops.append(["op": "parse_unsecured", "lib": library, "token": token, "expect": Base64URL.encode(payload)])
            }
            for library in Self.libraries {
                ops.append(["op": "make_unsecured", "lib": library, "payload": Base64URL.encode(payload)])
            }
        }
        let results = try PythonInterop.jose.run(ops)
        for (op, result) in zip(ops, results) {
            let context = "\(op["op"] ?? "") \(op["lib"] ?? "")"
            if op["op"] as? String == "parse_unsecured" {
                XCTAssertEqual(PythonInterop.string(result, "payload"), op["expect"] as? String, context)
                XCTAssertEqual(result["header"] as? [String: String], ["alg": "none"], context)
            } else if let token = PythonInterop.string(result, "token"), let payload = op["payload"] as? String {
                XCTAssertEqual(try JOSE.decode(compact: token, keys: { _ in nil }), Base64URL.decode(payload), context)
                if op["lib"] as? String == "joserfc" {
                    XCTAssertEqual(token, JWS.unsecured(payload: Base64URL.decode(payload) ?? []), context)
                }
            }
        }
    }

    func testRS256BothWays() throws {
        let key = try RSAPrivateKey(generatingBits: 2048)
        let publicPEM = try key.publicKey.pemRepresentation()
        let signingInput = Base64URL.encode(#"{"alg":"RS256","typ":"JWT"}"#.utf8) + "."
            + Base64URL.encode(#"{"iss":"push-gateway@example.iam.gserviceaccount.com","scope":"x","iat":1700000000}"#.utf8)
        let token = signingInput + "." + Base64URL.encode(try key.signRS256(signingInput.utf8))
        var forged = Array(token.utf8)
        forged[signingInput.utf8.count + 5] = forged[signingInput.utf8.count + 5] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let forgedToken = String(decoding: forged, as: UTF8.self)

        let results = try PythonInterop.jose.run([
            ["op": "rs256_verify", "lib": "pyjwt", "public_pem": publicPEM, "token": token],
            ["op": "rs256_verify", "lib": "cryptography", "public_pem": publicPEM, "token": token],
            ["op": "rs256_verify", "lib": "cryptography", "public_pem": publicPEM, "token": forgedToken],
            ["op": "rs256_sign", "lib": "pyjwt", "private_pem": try key.pemRepresentation(), "claims": ["sub": "abc", "n": 1]],
        ])
        XCTAssertEqual(results[0]["valid"] as? Bool, true, "\(results[0])")
        XCTAssertEqual((results[0]["claims"] as? [String: Any])?["iat"] as? Int, 1_700_000_000)
        XCTAssertEqual(results[1]["valid"] as? Bool, true, "\(results[1])")
        XCTAssertEqual(results[2]["valid"] as? Bool, false, "\(results[2])")
        guard let pyToken = PythonInterop.string(results[3], "token") else { return }
        let parts = pyToken.split(separator: ".", omittingEmptySubsequences: false)
        XCTAssertEqual(parts.count, 3)
        let message = Array(parts[0...1].joined(separator: ".").utf8)
        let signature = b64(String(parts[2]))
        XCTAssertTrue(key.publicKey.verifyRS256(signature: signature, message: message))
        // PKCS#1 v1.5 is deterministic: our signature over pyjwt's signing input is pyjwt's signature.
        XCTAssertEqual(try key.signRS256(message), signature)
        XCTAssertFalse(key.publicKey.verifyRS256(signature: signature, message: message + [0x20]))
    }
}
