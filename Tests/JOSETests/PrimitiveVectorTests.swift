import SSLCrypto
import XCTest

/// Known-answer tests for the SSLCrypto primitives. Every vector below was also re-derived with
/// Python's `cryptography` package when these tests were written.
final class PrimitiveVectorTests: XCTestCase {
    // McGrew & Viega, "The Galois/Counter Mode of Operation", Appendix B, test cases 13–16 (AES-256).
    private struct GCMVector {
        let name: String, key: String, iv: String, aad: String, plaintext: String, ciphertext: String, tag: String
    }

    private let gcmVectors: [GCMVector] = [
        GCMVector(name: "TC13", key: String(repeating: "00", count: 32), iv: String(repeating: "00", count: 12),
                  aad: "", plaintext: "", ciphertext: "", tag: "530f8afbc74536b9a963b4f1c4cb738b"),
        GCMVector(name: "TC14", key: String(repeating: "00", count: 32), iv: String(repeating: "00", count: 12),
                  aad: "", plaintext: String(repeating: "00", count: 16),
                  ciphertext: "cea7403d4d606b6e074ec5d3baf39d18", tag: "d0d1c8a799996bf0265b98b5d48ab919"),
        GCMVector(name: "TC15", key: "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
                  iv: "cafebabefacedbaddecaf888", aad: "",
                  plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                      + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
                  ciphertext: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                      + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
                  tag: "b094dac5d93471bdec1a502270e3cc6c"),
        GCMVector(name: "TC16", key: "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
                  iv: "cafebabefacedbaddecaf888", aad: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
                  plaintext: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                      + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
                  ciphertext: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                      + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
                  tag: "76fc6ece0f4e1768cddf8853bb2d551b"),
    ]

    func testAES256GCMMcGrewViegaVectors() throws {
        for vector in gcmVectors {
            let sealed = try AES256GCM.seal(hex(vector.plaintext), key: hex(vector.key), iv: hex(vector.iv), aad: hex(vector.aad))
            XCTAssertEqual(sealed.ciphertext.hexString, vector.ciphertext, vector.name)
            XCTAssertEqual(sealed.tag.hexString, vector.tag, vector.name)
            let opened = try AES256GCM.open(hex(vector.ciphertext), tag: hex(vector.tag), key: hex(vector.key),
                                            iv: hex(vector.iv), aad: hex(vector.aad))
            XCTAssertEqual(opened.hexString, vector.plaintext, vector.name)
        }
    }

    func testAES256GCMRejectsWrongTagAADAndSizes() throws {
        let vector = gcmVectors[3]
        var badTag = hex(vector.tag)
        badTag[15] ^= 0x01
        XCTAssertThrowsError(try AES256GCM.open(hex(vector.ciphertext), tag: badTag, key: hex(vector.key),
                                                iv: hex(vector.iv), aad: hex(vector.aad)))
        XCTAssertThrowsError(try AES256GCM.open(hex(vector.ciphertext), tag: hex(vector.tag), key: hex(vector.key),
                                                iv: hex(vector.iv), aad: [UInt8]()))
        XCTAssertThrowsError(try AES256GCM.seal([1], key: [UInt8](repeating: 0, count: 16), iv: hex(vector.iv), aad: [UInt8]()))
        XCTAssertThrowsError(try AES256GCM.seal([1], key: hex(vector.key), iv: [UInt8](repeating: 0, count: 16), aad: [UInt8]()))
        XCTAssertThrowsError(try AES256GCM.open([1], tag: [1, 2, 3], key: hex(vector.key), iv: hex(vector.iv), aad: [UInt8]()))
    }

    /// RFC 7520 §5.7.3: the CEK wrapped with A256GCMKW is a plain AES-256-GCM encryption with an empty AAD.
    func testAES256GCMRFC7520KeyWrapVector() throws {
        let key = b64("qC57l_uxcm7Nm3K-ct4GFjx8tM1U8CZ0NLBvdQstiS8")
        let iv = b64("KkYT0GX_2jHlfqN_")
        let cek = b64("UWxARpat23nL9ReIj4WG3D1ee9I4r-Mv5QLuFXdy_rE")
        let sealed = try AES256GCM.seal(cek, key: key, iv: iv, aad: [UInt8]())
        XCTAssertEqual(Base64URL.encode(sealed.ciphertext), "lJf3HbOApxMEBkCMOoTnnABxs_CvTWUmZQ2ElLvYNok")
        XCTAssertEqual(Base64URL.encode(sealed.tag), "kfPduVQ3T3H6vnewt--ksw")
        XCTAssertEqual(try AES256GCM.open(sealed.ciphertext, tag: sealed.tag, key: key, iv: iv, aad: [UInt8]()), cek)
    }

    /// RFC 3394 §4.6: wrap 256 bits of key data with a 256-bit KEK.
    func testAESKeyWrapRFC3394Vector() throws {
        let kek = hex("000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F")
        let keyData = hex("00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F")
        let wrapped = try AESKeyWrap.wrap(keyData, kek: kek)
        XCTAssertEqual(wrapped.hexString, "28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21".lowercased())
        XCTAssertEqual(try AESKeyWrap.unwrap(wrapped, kek: kek), keyData)

        for index in wrapped.indices {
            var tampered = wrapped
            tampered[index] ^= 0x80
            XCTAssertThrowsError(try AESKeyWrap.unwrap(tampered, kek: kek), "byte \(index)")
        }
        var otherKEK = kek
        otherKEK[0] ^= 1
        XCTAssertThrowsError(try AESKeyWrap.unwrap(wrapped, kek: otherKEK))
        XCTAssertThrowsError(try AESKeyWrap.unwrap(Array(wrapped.dropLast(8)) + [1, 2, 3], kek: kek))
        XCTAssertThrowsError(try AESKeyWrap.wrap(keyData, kek: Array(kek.prefix(16))))
        XCTAssertThrowsError(try AESKeyWrap.wrap(Array(keyData.prefix(12)), kek: kek))
    }

    func testSHA256AndHMACVectors() throws {
        // FIPS 180-2 Appendix B.1 and the empty string.
        XCTAssertEqual(SHA256.hash("abc".utf8).hexString, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256.hash([UInt8]()).hexString, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        // RFC 4231 test case 2.
        let mac = try HMACSHA256.authenticationCode(for: "what do ya want for nothing?".utf8, key: Array("Jefe".utf8))
        XCTAssertEqual(mac.hexString, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        XCTAssertTrue(HMACSHA256.isValid(mac, for: "what do ya want for nothing?".utf8, key: Array("Jefe".utf8)))
        XCTAssertFalse(HMACSHA256.isValid(mac, for: "what do ya want for nothing!".utf8, key: Array("Jefe".utf8)))
        XCTAssertFalse(HMACSHA256.isValid(Array(mac.dropLast()), for: "what do ya want for nothing?".utf8, key: Array("Jefe".utf8)))
    }

    func testBase64URL() {
        // RFC 4648 §10 vectors, unpadded, plus the two URL-safe characters.
        let cases: [(String, String)] = [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"),
                                         ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy")]
        for (plain, encoded) in cases {
            XCTAssertEqual(Base64URL.encode(plain.utf8), encoded)
            XCTAssertEqual(Base64URL.decode(encoded), Array(plain.utf8))
            XCTAssertEqual(Base64URL.encodedLength(plain.utf8.count), encoded.utf8.count)
        }
        XCTAssertEqual(Base64URL.encode([0xFB, 0xFF, 0xBF]), "-_-_")
        XCTAssertEqual(Base64URL.decode("-_-_"), [0xFB, 0xFF, 0xBF])
        // Padding, impossible lengths, non-canonical trailing bits ("Zh" and "Zm9" carry stray bits),
        // the standard alphabet's + and /, whitespace and non-ASCII are all rejected.
        for bad in ["Zg==", "Zm9v=", "Z", "Zm9vY", "Zh", "Zm9", "Zm+v", "Zm/v", "Zm 9v", "Zm9v\n", "é"] {
            XCTAssertNil(Base64URL.decode(bad), bad)
        }
        var random = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            XCTAssertEqual(Base64URL.decode(Base64URL.encode(bytes)), bytes)
        }
    }

    func testConstantTimeEqualsAndRandom() throws {
        XCTAssertTrue(constantTimeEquals([], []))
        XCTAssertTrue(constantTimeEquals([1, 2, 3], [1, 2, 3]))
        XCTAssertFalse(constantTimeEquals([1, 2, 3], [1, 2, 4]))
        XCTAssertFalse(constantTimeEquals([1, 2, 3], [1, 2]))
        let a = try SecureRandom.bytes(32), b = try SecureRandom.bytes(32)
        XCTAssertEqual(a.count, 32)
        XCTAssertNotEqual(a, b)
        XCTAssertEqual(try SecureRandom.bytes(0), [])
        XCTAssertThrowsError(try SecureRandom.bytes(-1))
    }
}
