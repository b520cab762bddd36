import Auth
import CompactJSON
import Foundation
import SSLCrypto
import XCTest

/// JWT verification against tokens and keys made by an independent implementation (PyJWT + cryptography,
/// see `make_fixtures.py`, which regenerates the `Fixtures` block below).
final class JWTVerifierTests: XCTestCase {
    /// A time before every fixture's `exp` and after every `nbf` that is meant to have passed.
    private let now: Int64 = 1_900_000_000

    private func hs1() -> AuthKey { .hs256(kid: "hs-1", secret: Array(Fixtures.hs1Secret.utf8)) }

    private func hs2() throws -> AuthKey {
        try AuthKey.parse(.object(["alg": .string("HS256"), "kid": .string("hs-2"), "secretBase64": .string(Fixtures.hs2SecretBase64)]))
    }

    private func rs(_ kid: String, _ pem: String) throws -> AuthKey { .rs256(kid: kid, try RSAPublicKey(pem: pem)) }
    private func es(_ kid: String?, _ pem: String) throws -> AuthKey { .es256(kid: kid, try ECPublicKey(pem: pem)) }

    /// Every fixture key.
    private func allKeys() throws -> [AuthKey] {
        [hs1(), try hs2(), try rs("rs-1", Fixtures.rs1PEM), try rs("rs-2", Fixtures.rs2PEM),
         try es("es-1", Fixtures.es1PEM), try es("es-2", Fixtures.es2PEM)]
    }

    private func assertRejected(
        _ token: String, _ expected: TokenError, keys: [AuthKey]? = nil, now: Int64? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let verifier = JWTVerifier(keys: try keys ?? allKeys())
        XCTAssertThrowsError(try verifier.verify(token, now: now ?? self.now), file: file, line: line) { error in
            XCTAssertEqual(error as? TokenError, expected, file: file, line: line)
        }
    }

    private func accepted(_ token: String, keys: [AuthKey]? = nil, now: Int64? = nil) throws -> VerifiedToken {
        try JWTVerifier(keys: try keys ?? allKeys()).verify(token, now: now ?? self.now)
    }

    // MARK: - Accepted tokens

    func testHS256Accepted() throws {
        let token = try accepted(Fixtures.hs256)
        XCTAssertEqual(token.uid, "user-1")
        XCTAssertEqual(token.expiresAt, 4_102_444_800)
        XCTAssertEqual(token.claims["scope"], .string("push"))
        XCTAssertEqual(token.claims["sub"], .string("subject-1"))
        XCTAssertEqual(token.claims["iat"], .number("1700000000"))
        XCTAssertEqual(try accepted(Fixtures.hs256, keys: [hs1()]).uid, "user-1")
    }

    func testHS256BinarySecretFromBase64Settings() throws {
        XCTAssertEqual(try accepted(Fixtures.hs256Binary, keys: [try hs2()]).uid, "user-2")
        XCTAssertEqual(try accepted(Fixtures.hs256NoKid, keys: [hs1(), try hs2()]).uid, "user-2")
    }

    func testRS256Accepted() throws {
        let token = try accepted(Fixtures.rs256, keys: [try rs("rs-1", Fixtures.rs1PEM)])
        XCTAssertEqual(token.uid, "user-rs")
        XCTAssertEqual(token.expiresAt, 4_102_444_800)
        XCTAssertEqual(try accepted(Fixtures.rs256).uid, "user-rs")
    }

    func testES256Accepted() throws {
        XCTAssertEqual(try accepted(Fixtures.es256, keys: [try es("es-1", Fixtures.es1PEM)]).uid, "user-es")
        XCTAssertEqual(try accepted(Fixtures.es256).uid, "user-es")
        XCTAssertEqual(try accepted(Fixtures.es256NoKid, keys: [try es(nil, Fixtures.es2PEM), try es(nil, Fixtures.es1PEM)]).uid, "user-es")
    }

    func testKeysFromSettings() throws {
        let keys = try [
            AuthKey.parse(.object(["alg": .string("HS256"), "kid": .string("hs-1"), "secret": .string(Fixtures.hs1Secret)])),
            AuthKey.parse(.object(["alg": .string("RS256"), "kid": .string("rs-1"), "publicKeyPEM": .string(Fixtures.rs1PEM)])),
            AuthKey.parse(.object(["alg": .string("ES256"), "publicKeyPEM": .string(Fixtures.es1PEM)])),
        ]
        XCTAssertEqual(keys.map(\.algorithm), [.hs256, .rs256, .es256])
        XCTAssertEqual(keys.map(\.kid), ["hs-1", "rs-1", nil])
        XCTAssertEqual(try accepted(Fixtures.hs256, keys: keys).uid, "user-1")
        XCTAssertEqual(try accepted(Fixtures.rs256, keys: keys).uid, "user-rs")
        XCTAssertEqual(try accepted(Fixtures.es256NoKid, keys: keys).uid, "user-es")
        // A header kid only selects keys with that kid: the kid-less ES256 key is not tried.
        try assertRejected(Fixtures.es256, .noMatchingKey, keys: keys)
    }

    // MARK: - Time

    func testExpiry() throws {
        let keys = [hs1()]
        XCTAssertEqual(try accepted(Fixtures.expired, keys: keys, now: 1_700_000_000).expiresAt, 1_700_000_000)
        XCTAssertNoThrow(try accepted(Fixtures.expired, keys: keys, now: 1_700_000_030))  // within the leeway
        try assertRejected(Fixtures.expired, .expired, keys: keys, now: 1_700_000_031)
        try assertRejected(Fixtures.expired, .expired, keys: keys)
        try assertRejected(Fixtures.expired, .expired, keys: keys, now: .max)
        // No leeway.
        let strict = JWTVerifier(keys: keys, leewaySeconds: 0)
        XCTAssertNoThrow(try strict.verify(Fixtures.expired, now: 1_700_000_000))
        XCTAssertThrowsError(try strict.verify(Fixtures.expired, now: 1_700_000_001)) { XCTAssertEqual($0 as? TokenError, .expired) }
        // A negative leeway counts as none.
        XCTAssertNoThrow(try JWTVerifier(keys: keys, leewaySeconds: -100).verify(Fixtures.expired, now: 1_700_000_000))
    }

    func testDecimalAndExponentExpiry() throws {
        let keys = [hs1()]
        XCTAssertEqual(try accepted(Fixtures.expDecimal, keys: keys, now: 1_700_000_030).expiresAt, 1_700_000_000)
        try assertRejected(Fixtures.expDecimal, .expired, keys: keys, now: 1_700_000_031)
        XCTAssertEqual(try accepted(Fixtures.expExponent, keys: keys, now: 1_700_000_030).expiresAt, 1_700_000_000)
        try assertRejected(Fixtures.expExponent, .expired, keys: keys, now: 1_700_000_031)
    }

    func testNotBefore() throws {
        let keys = [hs1()]
        try assertRejected(Fixtures.notBefore, .notYetValid, keys: keys, now: 1_799_999_969)
        XCTAssertNoThrow(try accepted(Fixtures.notBefore, keys: keys, now: 1_799_999_970))  // within the leeway
        XCTAssertNoThrow(try accepted(Fixtures.notBefore, keys: keys, now: 1_800_000_000))
        try assertRejected(Fixtures.notBefore, .notYetValid, keys: keys, now: .min)
        // nbf 1800000000.25: not valid until now + leeway >= 1800000000.25.
        try assertRejected(Fixtures.nbfDecimal, .notYetValid, keys: keys, now: 1_799_999_970)
        XCTAssertNoThrow(try accepted(Fixtures.nbfDecimal, keys: keys, now: 1_799_999_971))
        try assertRejected(Fixtures.nbfString, .invalidClaim("nbf"), keys: keys)
    }

    func testMissingOrInvalidExpiry() throws {
        try assertRejected(Fixtures.missingExp, .missingExpiry)
        try assertRejected(Fixtures.expString, .invalidClaim("exp"))
        try assertRejected(Fixtures.expHuge, .invalidClaim("exp"))
    }

    // MARK: - Forgeries

    func testFlippedSignatureByte() throws {
        for token in [Fixtures.hs256, Fixtures.rs256, Fixtures.es256] {
            for position in [0, 10, -1] {
                try assertRejected(flippingSignatureByte(token, at: position), .badSignature)
            }
        }
    }

    func testChangedPayload() throws {
        let forged = #"{"uid":"admin","sub":"subject-1","exp":4102444800,"iat":1700000000,"scope":"push"}"#
        for token in [Fixtures.hs256, Fixtures.rs256, Fixtures.es256] {
            var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            parts[1] = Base64URL.encode(Array(forged.utf8))
            try assertRejected(parts.joined(separator: "."), .badSignature)
        }
        // Changed header (kid swapped to the other key of the same algorithm) also breaks the signature.
        var parts = Fixtures.rs256.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        parts[0] = Base64URL.encode(Array(#"{"alg":"RS256","kid":"rs-2","typ":"JWT"}"#.utf8))
        try assertRejected(parts.joined(separator: "."), .badSignature)
    }

    func testWrongKey() throws {
        try assertRejected(Fixtures.rs256SignedByKey2WithKid1, .badSignature)
        try assertRejected(Fixtures.es256SignedByKey2WithKid1, .badSignature)
        try assertRejected(Fixtures.hs256WrongSecret, .badSignature)
        try assertRejected(Fixtures.hs256, .badSignature, keys: [.hs256(kid: "hs-1", secret: Array("not the secret".utf8))])
        // Kid-less token: every key of the algorithm is tried, none fits.
        try assertRejected(Fixtures.rs256NoKidKey2, .badSignature, keys: [try rs("rs-1", Fixtures.rs1PEM)])
        XCTAssertEqual(try accepted(Fixtures.rs256NoKidKey2).uid, "user-rs2")
        // An ES256 signature in DER form instead of r||s.
        try assertRejected(Fixtures.es256DERSignature, .badSignature)
        // Empty signature.
        try assertRejected(String(Fixtures.hs256.prefix { $0 != "." }) + "." + Fixtures.hs256.split(separator: ".")[1] + ".",
                           .badSignature)
    }

    // MARK: - Algorithms

    func testAlgNoneRejected() throws {
        try assertRejected(Fixtures.algNone, .unsupportedAlgorithm("none"))
        try assertRejected(Fixtures.algNone, .unsupportedAlgorithm("none"), keys: [])
        // Even with a signature appended.
        try assertRejected(Fixtures.algNone + String(Fixtures.hs256.split(separator: ".")[2]), .unsupportedAlgorithm("none"))
        try assertRejected(Fixtures.hs512, .unsupportedAlgorithm("HS512"))
        let odd = Base64URL.encode(Array(#"{"alg":"<script>alert(1)</script>"}"#.utf8)) + ".e30.AA"
        try assertRejected(odd, .unsupportedAlgorithm("?"))
        XCTAssertFalse(TokenError.unsupportedAlgorithm("?").description.contains("script"))
    }

    func testAlgorithmConfusionRejected() throws {
        let rsaOnly = [try rs("rs-1", Fixtures.rs1PEM)]
        try assertRejected(Fixtures.confusionRSAPEMKid, .noMatchingKey, keys: rsaOnly)
        try assertRejected(Fixtures.confusionRSAPEMNoKid, .noMatchingKey, keys: rsaOnly)
        let ecOnly = [try es("es-1", Fixtures.es1PEM)]
        try assertRejected(Fixtures.confusionECPEMNoKid, .noMatchingKey, keys: ecOnly)
        // With an unrelated HMAC key configured too, the public key is still never used as a secret.
        try assertRejected(Fixtures.confusionRSAPEMNoKid, .badSignature, keys: rsaOnly + [hs1()])
        try assertRejected(Fixtures.confusionRSAPEMKid, .noMatchingKey, keys: rsaOnly + [hs1()])
        // ES256 header with the RSA key's kid: the kid matches but the algorithm does not.
        try assertRejected(Fixtures.es256WithRSAKid, .noMatchingKey, keys: rsaOnly)
    }

    // MARK: - Key selection

    func testKidSelection() throws {
        // Only the key named by kid is tried.
        try assertRejected(Fixtures.hs256, .noMatchingKey, keys: [try hs2()])
        try assertRejected(Fixtures.hs256, .noMatchingKey, keys: [.hs256(kid: nil, secret: Array(Fixtures.hs1Secret.utf8))])
        try assertRejected(Fixtures.hs256, .badSignature, keys: [.hs256(kid: "hs-1", secret: Array("other".utf8)),
                                                                .hs256(kid: "hs-x", secret: Array(Fixtures.hs1Secret.utf8))])
        try assertRejected(Fixtures.rs256UnknownKid, .noMatchingKey)
        // Same kid on several keys: each is tried.
        let shared = [try rs("shared", Fixtures.rs2PEM), try rs("rs-1", Fixtures.rs1PEM)]
        XCTAssertEqual(try accepted(Fixtures.rs256, keys: shared).uid, "user-rs")
        XCTAssertEqual(try accepted(Fixtures.rs256, keys: [try rs("rs-1", Fixtures.rs2PEM), try rs("rs-1", Fixtures.rs1PEM)]).uid, "user-rs")
        // No kid: all keys of the algorithm are tried.
        XCTAssertEqual(try accepted(Fixtures.es256NoKid, keys: [try es("a", Fixtures.es2PEM), try es("b", Fixtures.es1PEM)]).uid, "user-es")
        try assertRejected(Fixtures.hs256, .noMatchingKey, keys: [])
    }

    // MARK: - User id

    func testUIDAndSub() throws {
        XCTAssertEqual(try accepted(Fixtures.hs256).uid, "user-1")  // uid wins over sub
        XCTAssertEqual(try accepted(Fixtures.subOnly).uid, "subject-only")
        XCTAssertEqual(try accepted(Fixtures.uidEmptySub).uid, "subject-2")
        XCTAssertEqual(try accepted(Fixtures.uidNumberSub).uid, "subject-3")
        try assertRejected(Fixtures.noUID, .missingUID)
        try assertRejected(Fixtures.emptySub, .missingUID)
    }

    // MARK: - Malformed input

    func testMalformed() throws {
        let parts = Fixtures.hs256.split(separator: ".").map(String.init)
        let cases: [String] = [
            "",
            ".",
            "..",
            "abc",
            parts[0] + "." + parts[1],                                          // 2 parts
            Fixtures.hs256 + ".",                                              // 4 parts
            Fixtures.hs256 + "." + parts[2],
            "!!!." + parts[1] + "." + parts[2],                                 // bad base64url
            parts[0] + ".*." + parts[2],
            parts[0] + "." + parts[1] + ".$$",
            parts[0] + "=." + parts[1] + "." + parts[2],                        // padding
            parts[0] + "." + parts[1] + "." + parts[2] + "=",
            parts[0] + "." + parts[1] + "." + parts[2] + "AA",                  // impossible length (remainder 1)
            parts[0] + "." + parts[1] + "." + nonCanonical(parts[2]),          // non-zero unused trailing bits
            " " + Fixtures.hs256,
            Fixtures.hs256 + "\n",
            Base64URL.encode(Array("not json".utf8)) + "." + parts[1] + "." + parts[2],  // non-JSON header
            Base64URL.encode(Array("[\"HS256\"]".utf8)) + "." + parts[1] + "." + parts[2],
            Base64URL.encode(Array("{\"typ\":\"JWT\"}".utf8)) + "." + parts[1] + "." + parts[2],  // no alg
            Base64URL.encode(Array("{\"alg\":256}".utf8)) + "." + parts[1] + "." + parts[2],
            Base64URL.encode([0xFF, 0xFE]) + "." + parts[1] + "." + parts[2],
            "é." + parts[1] + "." + parts[2],
            Fixtures.payloadNotJSON,                                           // correctly signed, payload not JSON
            Fixtures.payloadArray,
            Fixtures.critHeader,
            Fixtures.duplicateHeaderMember,
            Fixtures.duplicateClaim,
            Fixtures.kidNotString,
            Fixtures.tooLong,
            String(repeating: "A", count: 20_000),
        ]
        for (index, token) in cases.enumerated() {
            XCTAssertThrowsError(try JWTVerifier(keys: try allKeys()).verify(token, now: now), "case \(index)") { error in
                XCTAssertEqual(error as? TokenError, .malformed, "case \(index)")
            }
        }
        XCTAssertGreaterThan(Fixtures.tooLong.utf8.count, JWTVerifier.maximumTokenLength)
    }

    func testErrorDescriptionsAreShortAndNeverEchoTheToken() {
        let errors: [TokenError] = [.malformed, .unsupportedAlgorithm("none"), .noMatchingKey, .badSignature, .expired,
                                    .notYetValid, .missingExpiry, .invalidClaim("exp"), .missingUID]
        for error in errors {
            XCTAssertFalse(error.description.isEmpty)
            XCTAssertLessThan(error.description.count, 60)
            XCTAssertFalse(error.description.contains("eyJ"))
        }
        XCTAssertEqual(Set(errors.map(\.description)).count, errors.count)
    }

    // MARK: - AuthKey settings

    func testAuthKeySettingsErrors() throws {
        func message(_ settings: JSONValue) -> String {
            do {
                _ = try AuthKey.parse(settings)
                return "accepted"
            } catch {
                return error.message
            }
        }
        func object(_ members: [ExactString: JSONValue]) -> JSONValue { .object(members) }
        XCTAssertTrue(message(.string("HS256")).contains("JSON object"))
        XCTAssertTrue(message(object(["kid": .string("k")])).contains("'alg' is required"))
        XCTAssertTrue(message(object(["alg": .string("none"), "secret": .string("x")])).contains("'alg'"))
        XCTAssertTrue(message(object(["alg": .string("HS512"), "secret": .string("x")])).contains("'alg'"))
        XCTAssertTrue(message(object(["alg": .number("1")])).contains("'alg' must be a string"))
        XCTAssertTrue(message(object(["alg": .string("HS256")])).contains("'secret' or 'secretBase64' is required"))
        XCTAssertTrue(message(object(["alg": .string("HS256"), "secret": .string("")])).contains("'secret' must not be empty"))
        XCTAssertTrue(message(object(["alg": .string("HS256"), "secret": .number("5")])).contains("'secret' must be a string"))
        XCTAssertTrue(message(object(["alg": .string("HS256"), "secret": .string("a"), "secretBase64": .string("YQ==")])).contains("only one"))
        XCTAssertTrue(message(object(["alg": .string("HS256"), "secretBase64": .string("")])).contains("'secretBase64' must not be empty"))
        for bad in ["YQ=", "Y Q==", "YQ===", "-_8=", "Y", "YR==", "=YQ="] {
            XCTAssertTrue(message(object(["alg": .string("HS256"), "secretBase64": .string(bad)])).contains("'secretBase64' is not valid"), bad)
        }
        XCTAssertTrue(message(object(["alg": .string("HS256"), "kid": .string(""), "secret": .string("s")])).contains("'kid'"))
        XCTAssertTrue(message(object(["alg": .string("HS256"), "kid": .number("1"), "secret": .string("s")])).contains("'kid'"))
        XCTAssertTrue(message(object(["alg": .string("HS256"), "secret": .string("s"), "publicKeyPEM": .string("x")])).contains("unknown field 'publicKeyPEM'"))
        XCTAssertTrue(message(object(["alg": .string("RS256"), "publicKeyPem": .string("x")])).contains("unknown field 'publicKeyPem'"))
        XCTAssertTrue(message(object(["alg": .string("RS256")])).contains("'publicKeyPEM' is required"))
        XCTAssertTrue(message(object(["alg": .string("ES256"), "publicKeyPEM": .bool(true)])).contains("'publicKeyPEM' must be a string"))
        XCTAssertTrue(message(object(["alg": .string("RS256"), "publicKeyPEM": .string("garbage")])).contains("'publicKeyPEM'"))
        XCTAssertTrue(message(object(["alg": .string("RS256"), "publicKeyPEM": .string(Fixtures.es1PEM)])).contains("'publicKeyPEM'"))
        XCTAssertTrue(message(object(["alg": .string("ES256"), "publicKeyPEM": .string(Fixtures.rs1PEM)])).contains("not an EC key"))
        XCTAssertTrue(message(object(["alg": .string("ES256"), "publicKeyPEM": .string(Fixtures.p384PEM)])).contains("P-256"))
        // Secrets are never echoed.
        XCTAssertFalse(message(object(["alg": .string("HS256"), "secretBase64": .string("topsecret!")])).contains("topsecret"))

        // Valid forms.
        guard case .hs256(let kid, let secret) = try AuthKey.parse(object(["alg": .string("HS256"), "secretBase64": .string("AP8BAg==")])) else {
            return XCTFail("expected HS256")
        }
        XCTAssertNil(kid)
        XCTAssertEqual(secret, [0x00, 0xFF, 0x01, 0x02])
        guard case .hs256(_, let unpadded) = try AuthKey.parse(object(["alg": .string("HS256"), "secretBase64": .string("+/8")])) else {
            return XCTFail("expected HS256")
        }
        XCTAssertEqual(unpadded, [0xFB, 0xFF])
        guard case .hs256(_, let text) = try AuthKey.parse(object(["alg": .string("HS256"), "secret": .string("é")])) else {
            return XCTFail("expected HS256")
        }
        XCTAssertEqual(text, [0xC3, 0xA9])
        let parsed = try JSONParser.parse(#"{"alg":"ES256","kid":"k3","publicKeyPEM":"\#(Fixtures.es1PEM.replacingOccurrences(of: "\n", with: "\\n"))"}"#)
        let key = try AuthKey.parse(parsed)
        XCTAssertEqual(key.kid, "k3")
        XCTAssertEqual(key.algorithm, .es256)
    }

    // MARK: - ECPublicKey

    func testECPublicKeyVerifiesRawSignature() throws {
        let key = try ECPublicKey(pem: Fixtures.es1PEM)
        let message = Array(Fixtures.ecMessage.utf8)
        let signature = try XCTUnwrap(Base64URL.decode(Fixtures.ecRawSignatureB64URL))
        XCTAssertEqual(signature.count, 64)
        XCTAssertTrue(key.verifyES256(signature: signature, message: message))
        XCTAssertFalse(key.verifyES256(signature: signature, message: message + [0]))
        XCTAssertFalse(try ECPublicKey(pem: Fixtures.es2PEM).verifyES256(signature: signature, message: message))
        var flipped = signature
        flipped[63] ^= 1
        XCTAssertFalse(key.verifyES256(signature: flipped, message: message))
        // Not exactly 64 bytes.
        XCTAssertFalse(key.verifyES256(signature: Array(signature.prefix(63)), message: message))
        XCTAssertFalse(key.verifyES256(signature: signature + [0], message: message))
        XCTAssertFalse(key.verifyES256(signature: [], message: message))
        // r = 0, s = 0 and all-ones (>= the group order) are invalid.
        XCTAssertFalse(key.verifyES256(signature: [UInt8](repeating: 0, count: 64), message: message))
        XCTAssertFalse(key.verifyES256(signature: [UInt8](repeating: 0xFF, count: 64), message: message))
        // Round trip through PEM.
        XCTAssertTrue(try ECPublicKey(pem: key.pemRepresentation()).verifyES256(signature: signature, message: message))
    }

    func testECPublicKeyRefusesOtherKeys() {
        for (name, pem, expected) in [
            ("P-384", Fixtures.p384PEM, "unsupported curve"),
            ("secp256k1", Fixtures.secp256k1PEM, "unsupported curve"),
            ("RSA", Fixtures.rs1PEM, "not an EC key"),
            ("garbage", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "cannot read"),
            ("empty", "", "cannot read"),
        ] {
            XCTAssertThrowsError(try ECPublicKey(pem: pem), name) { error in
                let message = (error as? CryptoError)?.message ?? ""
                XCTAssertTrue(message.contains(expected), "\(name): \(message)")
                if expected == "unsupported curve" { XCTAssertTrue(message.contains("only P-256"), message) }
            }
        }
    }

    // MARK: - Helpers

    /// `encoded` (43 characters: 32 bytes) with its unused low 2 bits set, which strict base64url refuses.
    private func nonCanonical(_ encoded: String) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        guard let last = encoded.last, let index = alphabet.firstIndex(of: last) else { return encoded }
        return String(encoded.dropLast()) + String(alphabet[index | 1])
    }

    private func flippingSignatureByte(_ token: String, at position: Int) -> String {
        var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard var signature = Base64URL.decode(parts[2]), !signature.isEmpty else { return token }
        let index = position < 0 ? signature.count + position : position
        signature[index] ^= 0x01
        parts[2] = Base64URL.encode(signature)
        return parts.joined(separator: ".")
    }
}

/// Generated by `make_fixtures.py` (PyJWT 2.15.1 + cryptography); do not edit by hand.
enum Fixtures {
    // BEGIN GENERATED FIXTURES (make_fixtures.py)
    static let hs1Secret = "pushgateway test secret: 0123456789abcdef0123456789abcdef"
    static let hs2SecretBase64 = "1HaHJgP+pzjC6fUpoffMQasMaT9T2YW4IprdF4DyMTY="
    static let rs1PEM = """
        -----BEGIN PUBLIC KEY-----
        MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAyzaEzDa4FBWiGArjRdmg
        30fxUHw09bWXecSr158SCFvDjDFCoBPSSPV0iaWITZeD3vFTl9AHoNCkPkVGRM3u
        7gtwch40+8YZZ98HSIBLvsR5PKfaugUXR6EwgUYp153VPAqnN3OqxYENO5i+iNov
        2+tVrhPQSVGN/5N5gpQnmqaOZORMmIl+aomhNKUB7EoBMITjmnQANRIFEnpzZRLm
        qisyAn7hglN8aOXRe3Ovi/mJSCIg8i/OY4BoysE+ylOP8wYvOircAtOTxPkZTV8r
        H08dihY84GcsPnCL99GpjBhJBH1AcZie2iOh63J4OgY2N7jR7p/YMdvxgpQmWkt/
        uwIDAQAB
        -----END PUBLIC KEY-----

        """
    static let rs2PEM = """
        -----BEGIN PUBLIC KEY-----
        MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAyQ2HR01LAVHq7t9ZLHQn
        WSySRXAkLZTNG06zvjM/ffj2J+PCvaqciiSylNzLvR6ayPyNUSJSUiCR0MpbzTHS
        BtRS1+2EMWN8cVrWzhHN2pIdPsrw46UPTS8jPe05yaqvbJXZc9vnWTU7xKco+MYt
        z9aCZhHM9y3S19CQ3QH9YcSE1oAfzfx94IxWck5qelrmpdYU5YMgGCgn/Cm5xFg9
        Y0Cc4dChHDNx6mbDiWOyV/Z6/vx9ix+lZK2TkzcPYxnT4R0DWrngLLAkL1/2pZe2
        eG0oCWA+M/b8fU0GvEVex5pOunVH+MFXv8ywRTMbkPWPaAREQrFXgosifcNOscHb
        qwIDAQAB
        -----END PUBLIC KEY-----

        """
    static let es1PEM = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEonamHrdO6Z9+7M5FQZXUkLUtsZxC
        wCiH/7fMaeeKsrrJc9Q559zu9CEt1cqupwqmoAYCnLdbMz1w+1A35Uoapg==
        -----END PUBLIC KEY-----

        """
    static let es2PEM = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEoNd7x9UpQERll1XT+WfgcEbu3Ydt
        QMdDuvXnjHDiCQH6+G85GDefBDHdUXLE3os3NeqoINMnnhTKb80krNShJA==
        -----END PUBLIC KEY-----

        """
    static let p384PEM = """
        -----BEGIN PUBLIC KEY-----
        MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEHUy5U43AGI92tAvHiIztxlG3JEtjiJqT
        2BnXWHV78JeJV7/n7j0kJMJsYWfOXugPOn0BOeDH9rq6i9XKEuZFkqIHQDKBuDxg
        QNybVbrONLCpoJUFd8NK6dfIxJb5eJJq
        -----END PUBLIC KEY-----

        """
    static let secp256k1PEM = """
        -----BEGIN PUBLIC KEY-----
        MFYwEAYHKoZIzj0CAQYFK4EEAAoDQgAE3SmWF2fe0oqfzST5PaRq+d2YKXAKO492
        BJadrx8+RrdDPcA2x+0XzcNSAYP7sQiIBYRVo1WefjY3Nk0g6cSHBQ==
        -----END PUBLIC KEY-----

        """
    static let ecMessage = "ECPublicKey fixture message"
    static let ecRawSignatureB64URL = "ux98j6rN9k9toch-Kk7sRtHjybUh0l_NiWWiGm6fOdlwW0Of7RBdccJayQjnqzH7eUjOP0Z2rT3aSeBLADC5hA"
    static let hs256 = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJzdWIiOiJzdWJqZWN0LTEiLCJleHAiOjQxMDI0NDQ4MDAsImlhdCI6MTcwMDAwMDAwMCwic2NvcGUiOiJwdXNoIn0.hNe7CCiGECpnnVSMTpE4b0csnl03sgRXmj7mHar1RNU"
    static let hs256Binary = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTIiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJ1c2VyLTIiLCJleHAiOjQxMDI0NDQ4MDB9.6jOyMXpiUaYwHIX-4iLUEsJRu4wUXi1hi10Epsh32NM"
    static let hs256NoKid = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTIiLCJleHAiOjQxMDI0NDQ4MDB9.CnwdGrJZIvJaWa3eA9m0F9956RLJB4EW_eJdhhx5W_c"
    static let rs256 = "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzLTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJ1c2VyLXJzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.h2DKuuZnI4188TmX3ZldzFGb6lcDv2LAAxz1tB6vHhALWbaVcs-jILyj4Tfx51-qD7Qs0kmeylaANG-7GO2SHdB3CAW23VaTgzvmhuWLlIUO9t9FUFn3HOBm20DdBvOxe-9v67wUy9FAUGWMtY-8HMy_qveBTQdI6L5lE2LJiXgB-ZhD1xWNXWuWmAL8GMolB8UhlqleGKbVIYxKDeBACyg8LMo2Z1ZZhGMCtIM5WfnjxWxH01w1uJCQE0g32iiMbbLhrTvB39VjnaIu2SEV4GzWzEZoKRGpHXsD6iWhBAEt6EPVqR9upX1QDHo5U1T_3FOItTL9BDlNO0cRneBaBQ"
    static let rs256NoKidKey2 = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLXJzMiIsImV4cCI6NDEwMjQ0NDgwMH0.wGEeQzVfJmRqUQVvpgT-C2-QjTx7CDEniWdwrPlXsuCADfanRxYpt1W_okEaz4sh3NDKynPUBOdEwi0rPZtczGrZJz8RGRPkyS7HhlGE5LSRngzgBQeHjIyy8qEuUTM160xvfs1LwbcKJ5Z4H_wjmutS7yNyIuWDYzE0ZdK00_jtTiyrr_TkZG7zBpsUX3RzlfYT-TxkRl5P_rXI6W1FYm4ghLjG0PKY8fRMuP4w9O4qEtyn8f8fNt78juwE6OWEbrwt0dSvh4NH-mcaUWXhSdlsrTBPZb_yvX5dIxcYf00KArwTKqZDs1eSMP95pi3aXR0kuftRQppgJy1L_oaC4A"
    static let es256 = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImVzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLWVzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.YCgfhJNZ87Mkzizzerbo2JAVnsnVJPMoTjgsFmHRUwlC8ARia_5O2nxeNI28YT56EExj9PnKng_T0GZ3rM78Wg"
    static let es256NoKid = "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1aWQiOiJ1c2VyLWVzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.4PyGVkEO-BgBwunCb4HuXlMMUfJsMJuSlbyTHL4blLYJVi9CAoR1ZuQuRj4cwj4e9sgxcapszEkxWsDK3AwIUQ"
    static let rs256SignedByKey2WithKid1 = "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzLTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJ1c2VyLXJzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.RwkTUHYYtNumUPQOTUoQiTV_CIsB-MmnlPds0bytvbGUdwHWPS9n1_N-mZPtxya61aV-coW7JsmcQ2l5NCSLg_U0o2VBAPyedn9q7R9T6cthDahyfe3JxVvSFoWE5JAi7logzohD4AXvjx5y1kU3HOj1j2UuaDKH8VavYxCQlHmhyOmvoPrCp4cGP8LxIAblw5daV6MYOQb_eRSTagn_uCC0mhVXj2tJhv8vweD-tubSI-2fKUothAQmXWJAg0wAq0pljBTrq4G67v15Gtzm_beT48jSIlVxsJcpxUsGvSRggyW4ptTcQ82-XDqRryAE-HBYY80tRWePPrDyKdxtHg"
    static let es256SignedByKey2WithKid1 = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImVzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLWVzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.Nn9Wpawo-2J767BQKefedXXNRNTczPtwnezblpKmGAsSbvPErZEIKt4yO4oJxMVULp9PUSfapAQlATAmJ-sFSA"
    static let hs256WrongSecret = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJzdWIiOiJzdWJqZWN0LTEiLCJleHAiOjQxMDI0NDQ4MDAsImlhdCI6MTcwMDAwMDAwMCwic2NvcGUiOiJwdXNoIn0.fWfdTekT5KPY7sLamlovyzKOMmIwqeOTVUGN1WvAgjU"
    static let rs256UnknownKid = "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzLTkiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJ1c2VyLXJzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.rCMJV7ADw0tP1Wmck6A1m24lCSfeH-CIlX2vGYu7fsO5DwCABXIP1DLh5JAHqRmJN-wydaI5ucNiQTLw2qx1zQmJLbxdLMa1WcqDi6Tk7m2YPzMhml5TeXE_7G3cNErADb1GklB6xQcMULwjCU9C7DXJkajEsHPn-sVWVnW_pNMb_y7Hv9ENQwkfsWc0EXPhyqjmc521X8lkx2ei4otDS8VA-JDW6zWMct0F44KHGLoD38dIFnZombpyn6K9NY67gu7WJm0OZZ_aehrRaMybxagBs1cv4zhQcdyblyW12vVUKEuOyFYsthLEaNHSjJ09HqylvN9AePSWS0wEWVf9NQ"
    static let es256WithRSAKid = "eyJhbGciOiJFUzI1NiIsImtpZCI6InJzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLWVzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.wuKo6QC0mPnBXE8Ba5qVkWbnGM5SrhGiqDklwxeJpYyjz_mlzS2yyGaaaQ76QZFiRQv0k9uqMOBEAansCQetNw"
    static let es256DERSignature = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImVzLTEifQ.eyJ1aWQiOiJ1c2VyLWVzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.MEQCIDqLxAPFYq_boCnE9HqirAOuYUcwF-fi5v_ag-NQR5OOAiBL99f2bmkeLMs04PlbdU_P4R4O-3ei30weI0Lrtoa-nA"
    static let algNone = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJ1aWQiOiJyb290IiwiZXhwIjo0MTAyNDQ0ODAwfQ."
    static let hs512 = "eyJhbGciOiJIUzUxMiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDB9.tpNeKFcZ0wrkOLjgSbOlpojZCSJ6BuJOIYnjbIps9hCezjyEnmRpuv7R3BY6qo5SkEOLSVOWAEBvXkGuxRH81Q"
    static let confusionRSAPEMKid = "eyJhbGciOiJIUzI1NiIsImtpZCI6InJzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJyb290IiwiZXhwIjo0MTAyNDQ0ODAwfQ.FQFBIWE_YKEXIKbnBpfz5wmS0ZRPngVWQTy2tFtEQpY"
    static let confusionRSAPEMNoKid = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1aWQiOiJyb290IiwiZXhwIjo0MTAyNDQ0ODAwfQ.EoHFT38M7a7l_bjLAXYBnvNuPBQDDbkWMxhsmMJtiu0"
    static let confusionECPEMNoKid = "eyJhbGciOiJIUzI1NiJ9.eyJ1aWQiOiJyb290IiwiZXhwIjo0MTAyNDQ0ODAwfQ.1nyLscis5Vx1JfjDumPSoeNLjT6S5pK63QWKfFq_dMw"
    static let expired = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjE3MDAwMDAwMDB9.5GBEgZwKBBqa5HoTZ4F4kG9MftjKNuT9MxxsIMOWyN4"
    static let expDecimal = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjE3MDAwMDAwMDAuNX0.8rmD61LMadDV3b0hRGeAVvNTQE2imJKoU9a3cEWjcPA"
    static let expExponent = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjEuN2U5fQ.f8YLHE7Ntgj3UC41td1xdF4d4GrI5JuYjUiL0ToRP7E"
    static let notBefore = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsIm5iZiI6MTgwMDAwMDAwMH0._6KQqIdgm0ynVUpg_Zxr1C-OPOHq6Kz5iCbAqnNHJyM"
    static let nbfDecimal = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsIm5iZiI6MTgwMDAwMDAwMC4yNX0.q9flAxvDAwS-YM_mZNumCA_lljdBWEJlNiwU5qPy6xQ"
    static let missingExp = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJpYXQiOjE3MDAwMDAwMDB9.JH0OdzTHNw6gCU2_94dBt5PCCKuqlmkHMzfCto0iEPc"
    static let expString = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOiI0MTAyNDQ0ODAwIn0.3eNl8M8os17BZ7JJlzgdSvL1Jfn0dZ8vJFVZ3v7oHi0"
    static let expHuge = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjFlMzAwfQ.P4_4XKaRZbCDAuCdnI0cavsgQnNvuxnhdh9mFs6yz7I"
    static let nbfString = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsIm5iZiI6InNvb24ifQ.FFSMY49fujIc5wymedZ1KEYPYs-4VmkIiAYzOSOH7CA"
    static let subOnly = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJzdWJqZWN0LW9ubHkiLCJleHAiOjQxMDI0NDQ4MDB9.JuzUtyACpZq2mQitMPB-WFR5fW0Nj_roaf7xD--r3rc"
    static let uidEmptySub = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiIiLCJzdWIiOiJzdWJqZWN0LTIiLCJleHAiOjQxMDI0NDQ4MDB9.CSDQlyMs6qWaTpUYlIj3zMP7FzGssx8SAegxQ4OiU2U"
    static let uidNumberSub = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOjQyLCJzdWIiOiJzdWJqZWN0LTMiLCJleHAiOjQxMDI0NDQ4MDB9.n3UrGG71a27ApHB-N4QG5SgderDXtjP1NtFbSmkDvzk"
    static let noUID = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJuYW1lIjoibm9ib2R5IiwiZXhwIjo0MTAyNDQ0ODAwfQ.2YZguZr5Rg3WaKmX060sQ0zqKAVriZDBsc5ltmYNJo8"
    static let emptySub = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiIiLCJleHAiOjQxMDI0NDQ4MDB9.SVYvwfsgbdrKh00pwZCGvNtG3e68V7THQaVc5k75kUA"
    static let payloadNotJSON = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.bm90IGpzb24.6gL-Y4Kp4jQa40csW3anPrSysynYpa9Md-wmvvvZjs0"
    static let payloadArray = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.WzEsMiwzXQ.KzSNzPbw3Fx_vdG42UCY4ESB3ygA-Lq5FVxubh9UKzg"
    static let critHeader = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJjcml0IjpbImV4cCJdfQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDB9.ZO4s3G4CHwYoMtQ9083DIJpsAwdjosevLgInm3DtTKw"
    static let duplicateHeaderMember = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJraWQiOiJocy0yIn0.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDB9.SgIlljAUuGW2Get8cwK2lSj6_epmloOl04j_pV237Co"
    static let duplicateClaim = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEifQ.eyJ1aWQiOiJ1c2VyLTEiLCJ1aWQiOiJyb290IiwiZXhwIjo0MTAyNDQ0ODAwfQ.5y7ytdeWFa4wLHyRYqLrLsJVFbDEjnifAGhId6P9o3o"
    static let kidNotString = "eyJhbGciOiJIUzI1NiIsImtpZCI6N30.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDB9.ha_V1vQdCG0VJaNdLonwfVkLJy9ShIZqXYdvmyH9thE"
    static let tooLong = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsInBhZCI6Inh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4In0.kgx018aBeNFBzI8-5Jki8dO7XC-n41m-O-Ksq5b9TZw"
    // END GENERATED FIXTURES
}
