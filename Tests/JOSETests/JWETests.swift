import Foundation
import JOSE
import SSLCrypto
import XCTest

final class JWETests: XCTestCase {
    private static let rsaKey = Result { try RSAPrivateKey(generatingBits: 2048) }

    private func keys() throws -> [JWEKey] {
        [
            try JWEKey.dir(kid: "dir-1", key: SecureRandom.bytes(32)),
            try JWEKey.a256kw(kid: "kw-1", kek: SecureRandom.bytes(32)),
            JWEKey.rsaOAEP256(kid: "rsa-1", privateKey: try Self.rsaKey.get()),
        ]
    }

    private let payload = Array(#"{"t":"v","m":"value","a":"toto","v":{"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj"},"s":"OK","p":"/some/webcom/path","id":"s1"}"#.utf8)

    func testRoundTripAndExactHeader() throws {
        for key in try keys() {
            let compact = try JWE.encrypt(payload: payload, key: key)
            let parts = compact.split(separator: ".", omittingEmptySubsequences: false)
            XCTAssertEqual(parts.count, 5)
            let header = String(decoding: b64(String(parts[0])), as: UTF8.self)
            XCTAssertEqual(header, #"{"alg":"\#(key.algorithm.rawValue)","enc":"A256GCM","kid":"\#(key.kid)"}"#)
            XCTAssertEqual(b64(String(parts[1])).count, key.encryptedKeyByteCount)
            XCTAssertEqual(b64(String(parts[2])).count, 12)
            XCTAssertEqual(b64(String(parts[3])).count, payload.count)
            XCTAssertEqual(b64(String(parts[4])).count, 16)
            XCTAssertEqual(try JWE.decrypt(compact: compact, keys: { $0 == key.kid ? key : nil }), payload)
            XCTAssertEqual(try JOSE.decode(compact: compact, keys: { $0 == key.kid ? key : nil }), payload)
            // Fresh IV (and CEK) per message.
            XCTAssertNotEqual(compact, try JWE.encrypt(payload: payload, key: key))
            XCTAssertEqual(try JWE.decrypt(compact: try JWE.encrypt(payload: [], key: key), keys: { _ in key }), [])
        }
    }

    func testKidIsJSONEscaped() throws {
        let kid = "a\"b\\c\u{1}\n/é😀"
        let key = try JWEKey.dir(kid: kid, key: SecureRandom.bytes(32))
        let compact = try JWE.encrypt(payload: payload, key: key)
        let header = String(decoding: b64(String(compact.split(separator: ".")[0])), as: UTF8.self)
        // Escaped exactly as Python's json.dumps does by default: the header is pure ASCII.
        XCTAssertEqual(header, #"{"alg":"dir","enc":"A256GCM","kid":"a\"b\\c\u0001\n/\u00e9\ud83d\ude00"}"#)
        var seenKid: String?? = .none
        XCTAssertEqual(try JWE.decrypt(compact: compact, keys: { seenKid = .some($0); return key }), payload)
        XCTAssertEqual(seenKid, .some(kid))
        XCTAssertEqual(compact.utf8.count, JWE.compactLength(payloadLength: payload.count, alg: .dir, kid: kid))
    }

    func testCompactLengthMatchesRealOutput() throws {
        let rsa3072 = try RSAPrivateKey(generatingBits: 3072)
        var allKeys = try keys()
        allKeys.append(JWEKey.rsaOAEP256(kid: "rsa-3072", publicKey: rsa3072.publicKey))
        for key in allKeys {
            let modulus = key.algorithm == .rsaOAEP256 ? key.encryptedKeyByteCount : 256
            for length in Array(0...40) + [1000, 1001, 1002, 3000, 4093] {
                let compact = try JWE.encrypt(payload: [UInt8](repeating: 0x61, count: length), key: key)
                XCTAssertEqual(compact.utf8.count, JWE.compactLength(payloadLength: length, key: key), "\(key.kid) \(length)")
                XCTAssertEqual(compact.utf8.count,
                               JWE.compactLength(payloadLength: length, alg: key.algorithm, kid: key.kid, rsaModulusBytes: modulus),
                               "\(key.kid) \(length)")
            }
        }
        // A hand-checked value: dir, kid "k1", 100-byte payload:
        // header {"alg":"dir","enc":"A256GCM","kid":"k1"} (40 bytes -> 54) + "." + "" + "." + 16 + "." + 134 + "." + 22.
        XCTAssertEqual(JWE.compactLength(payloadLength: 100, alg: .dir, kid: "k1"), 54 + 1 + 0 + 1 + 16 + 1 + 134 + 1 + 22)
        XCTAssertEqual(JWS.unsecured(payload: payload).utf8.count, JWS.unsecuredLength(payloadLength: payload.count))
    }

    /// Flipping any single bit of any decoded part (re-encoded canonically) must be rejected,
    /// and so must replacing any character of the compact form.
    func testTamperingIsRejected() throws {
        for key in try keys() {
            let compact = try JWE.encrypt(payload: Array(payload.prefix(40)), key: key)
            let parts = compact.split(separator: ".", omittingEmptySubsequences: false).map { b64(String($0)) }
            for (partIndex, part) in parts.enumerated() {
                // For RSA the 2048-bit encrypted key is sampled to keep the test fast.
                let stride = (partIndex == 1 && key.algorithm == .rsaOAEP256) ? 29 : 1
                for bit in Swift.stride(from: 0, to: part.count * 8, by: stride) {
                    var tamperedParts = parts.map { Base64URL.encode($0) }
                    var bytes = part
                    bytes[bit / 8] ^= UInt8(1 << (bit % 8))
                    tamperedParts[partIndex] = Base64URL.encode(bytes)
                    let tampered = tamperedParts.joined(separator: ".")
                    XCTAssertThrowsError(try JWE.decrypt(compact: tampered, keys: { _ in key }),
                                         "\(key.algorithm) part \(partIndex) bit \(bit)")
                }
            }
        }
        let key = try JWEKey.dir(kid: "d", key: SecureRandom.bytes(32))
        let compact = Array(try JWE.encrypt(payload: Array(payload.prefix(20)), key: key).utf8)
        for index in compact.indices where compact[index] != UInt8(ascii: ".") {
            var tampered = compact
            tampered[index] = compact[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            XCTAssertThrowsError(try JWE.decrypt(compact: String(decoding: tampered, as: UTF8.self), keys: { _ in key }), "char \(index)")
        }
    }

    func testStrictParsing() throws {
        let dirBytes = try SecureRandom.bytes(32)
        let dirKey = try JWEKey.dir(kid: "d", key: dirBytes)
        let kwKey = try JWEKey.a256kw(kid: "d", kek: SecureRandom.bytes(32))
        let compact = try JWE.encrypt(payload: payload, key: dirKey)
        let parts = compact.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        func rejects(_ text: String, with key: JWEKey? = nil, _ why: String) {
            XCTAssertThrowsError(try JWE.decrypt(compact: text, keys: { _ in key ?? dirKey }), why)
            XCTAssertThrowsError(try JOSE.decode(compact: text, keys: { _ in key ?? dirKey }), why)
        }
        func withHeader(_ json: String) -> String {
            ([Base64URL.encode(json.utf8)] + parts.dropFirst()).joined(separator: ".")
        }

        rejects(parts.dropLast().joined(separator: "."), "4 parts")
        rejects(compact + ".", "6 parts")
        rejects("", "empty")
        rejects(withHeader(#"{"alg":"dir","enc":"A256GCM","kid":"d"}"#) + "=", "padding")
        rejects(compact, with: kwKey, "key for another alg")
        rejects(withHeader(#"{"alg":"A256KW","enc":"A256GCM","kid":"d"}"#), "header alg differs from key alg")
        rejects(withHeader(#"{"alg":"dir","enc":"A128GCM","kid":"d"}"#), "other enc")
        rejects(withHeader(#"{"alg":"dir","kid":"d"}"#), "missing enc")
        rejects(withHeader(#"{"enc":"A256GCM","kid":"d"}"#), "missing alg")
        rejects(withHeader(#"{"alg":"RSA-OAEP","enc":"A256GCM","kid":"d"}"#), "unsupported alg")
        rejects(withHeader(#"{"alg":"dir","enc":"A256GCM","kid":"d","zip":"DEF"}"#), "zip")
        rejects(withHeader(#"{"alg":"dir","enc":"A256GCM","kid":"d","crit":["exp"],"exp":1}"#), "crit")
        rejects(withHeader(#"{"alg":"dir","alg":"dir","enc":"A256GCM","kid":"d"}"#), "duplicate member")
        rejects(withHeader(#"{"alg":"dir","enc":"A256GCM","kid":7}"#), "non-string kid")
        rejects(withHeader(#"{"alg":"dir","enc":"A256GCM","kid":"d"} x"#), "trailing garbage")
        rejects(withHeader(#"["alg","dir"]"#), "not an object")
        rejects(withHeader(#"{"alg":"dir","enc":"A256GCM","kid":"\ud800"}"#), "lone surrogate")
        // dir must have an empty encrypted key; IV and tag sizes are exact.
        var withKey = parts
        withKey[1] = Base64URL.encode([UInt8](repeating: 1, count: 40))
        rejects(withKey.joined(separator: "."), "dir with an encrypted key")
        var longIV = parts
        longIV[2] = Base64URL.encode([UInt8](repeating: 1, count: 16))
        rejects(longIV.joined(separator: "."), "16-byte IV")
        var shortTag = parts
        shortTag[4] = Base64URL.encode(b64(parts[4]).prefix(12))
        rejects(shortTag.joined(separator: "."), "truncated tag")
        // Unknown kid: the lookup decides.
        XCTAssertThrowsError(try JWE.decrypt(compact: compact, keys: { _ in nil }))
        // A public-only RSA key cannot decrypt.
        let rsa = try Self.rsaKey.get()
        let rsaCompact = try JWE.encrypt(payload: payload, key: .rsaOAEP256(kid: "r", publicKey: rsa.publicKey))
        XCTAssertThrowsError(try JWE.decrypt(compact: rsaCompact, keys: { _ in .rsaOAEP256(kid: "r", publicKey: rsa.publicKey) }))
        XCTAssertEqual(try JWE.decrypt(compact: rsaCompact, keys: { _ in .rsaOAEP256(kid: "r", privateKey: rsa) }), payload)
        // Whitespace and extra members in a header written by someone else are fine.
        let relaxedHeader = Base64URL.encode(#" { "kid" : "d", "typ":"JWT", "x":[1,{"y":null},-2.5e3,true], "enc":"A256GCM","alg":"dir" } "#.utf8)
        let sealed = try AES256GCM.seal(payload, key: dirBytes, iv: [UInt8](repeating: 7, count: 12), aad: relaxedHeader.utf8)
        let relaxed = [relaxedHeader, "", Base64URL.encode([UInt8](repeating: 7, count: 12)), Base64URL.encode(sealed.ciphertext), Base64URL.encode(sealed.tag)].joined(separator: ".")
        XCTAssertEqual(try JWE.decrypt(compact: relaxed, keys: { _ in dirKey }), payload)
    }

    func testKeySizesAreChecked() throws {
        XCTAssertThrowsError(try JWEKey.dir(kid: "k", key: [UInt8](repeating: 0, count: 16)))
        XCTAssertThrowsError(try JWEKey.dir(kid: "k", key: [UInt8](repeating: 0, count: 33)))
        XCTAssertThrowsError(try JWEKey.a256kw(kid: "k", kek: [UInt8](repeating: 0, count: 24)))
        // An A256KW JWE whose encrypted key is not 40 bytes.
        let key = try JWEKey.a256kw(kid: "k", kek: SecureRandom.bytes(32))
        var parts = try JWE.encrypt(payload: payload, key: key).split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        parts[1] = Base64URL.encode(b64(parts[1]) + [UInt8](repeating: 0, count: 8))
        XCTAssertThrowsError(try JWE.decrypt(compact: parts.joined(separator: "."), keys: { _ in key }))
    }

    func testUnsecuredJWS() throws {
        let compact = JWS.unsecured(payload: payload)
        XCTAssertTrue(compact.hasPrefix("eyJhbGciOiJub25lIn0."))
        XCTAssertTrue(compact.hasSuffix("."))
        XCTAssertEqual(try JWS.decodeUnsecured(compact: compact), payload)
        XCTAssertEqual(try JOSE.decode(compact: compact, keys: { _ in nil }), payload)
        XCTAssertEqual(JWS.unsecured(payload: []), "eyJhbGciOiJub25lIn0..")
        XCTAssertEqual(try JOSE.decode(compact: "eyJhbGciOiJub25lIn0..", keys: { _ in nil }), [])

        let body = Base64URL.encode(payload)
        for bad in [
            "eyJhbGciOiJub25lIn0.\(body).c2ln",                              // a signature
            "eyJhbGciOiJub25lIn0.\(body)",                                   // two parts
            "\(Base64URL.encode(#"{"alg":"HS256"}"#.utf8)).\(body).",        // another alg
            "\(Base64URL.encode(#"{"alg":"none","crit":["b64"],"b64":false}"#.utf8)).\(body).",
            "eyJhbGciOiJub25lIn0.\(body)=.",                                 // padding
            "eyJhbGciOiJub25lIn0.\(body)*.",                                 // bad character
        ] {
            XCTAssertThrowsError(try JOSE.decode(compact: bad, keys: { _ in nil }), bad)
        }
    }

    func testConcurrentUseOfSharedKeys() throws {
        let keys = try keys()
        let failures = FailureCounter()
        let payload = self.payload
        DispatchQueue.concurrentPerform(iterations: 64) { iteration in
            let key = keys[iteration % keys.count]
            do {
                let compact = try JWE.encrypt(payload: payload, key: key)
                if try JWE.decrypt(compact: compact, keys: { _ in key }) != payload { failures.increment() }
            } catch {
                failures.increment()
            }
        }
        XCTAssertEqual(failures.value, 0)
    }
}

private final class FailureCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
