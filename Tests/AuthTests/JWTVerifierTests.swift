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
        XCTAssertEqual(try accepted(Fixtures.subOnly).uid, "subject-only")  // no uid: sub
        // A uid claim that is present but not a non-empty string is refused, never replaced by sub.
        try assertRejected(Fixtures.uidEmptySub, .invalidClaim("uid"))
        try assertRejected(Fixtures.uidNumberSub, .invalidClaim("uid"))
        try assertRejected(Fixtures.uidNullSub, .invalidClaim("uid"))
        try assertRejected(Fixtures.noUID, .missingUID)
        try assertRejected(Fixtures.emptySub, .missingUID)
    }

    // MARK: - Issuer and audience

    private static let issuer = "https://issuer.example/project-1"
    private static let audience = "project-1"

    private func bound(issuer: String? = JWTVerifierTests.issuer, audience: String? = JWTVerifierTests.audience) throws -> JWTVerifier {
        JWTVerifier(keys: try allKeys(), issuer: issuer, audience: audience)
    }

    private func assertRejected(_ token: String, _ expected: TokenError, by verifier: JWTVerifier, line: UInt = #line) {
        XCTAssertThrowsError(try verifier.verify(token, now: now), line: line) { error in
            XCTAssertEqual(error as? TokenError, expected, line: line)
        }
    }

    func testIssuerAndAudienceEnforcedWhenSet() throws {
        let verifier = try bound()
        XCTAssertEqual(try verifier.verify(Fixtures.issAud, now: now).uid, "user-1")
        XCTAssertEqual(try verifier.verify(Fixtures.issAudArray, now: now).uid, "user-1")
        XCTAssertEqual(try verifier.verify(Fixtures.rs256IssAud, now: now).uid, "user-rs")
        assertRejected(Fixtures.otherIssuer, .invalidIssuer, by: verifier)
        assertRejected(Fixtures.issNumber, .invalidIssuer, by: verifier)
        assertRejected(Fixtures.otherAudience, .invalidAudience, by: verifier)
        assertRejected(Fixtures.audArrayWithout, .invalidAudience, by: verifier)
        assertRejected(Fixtures.audArrayEmpty, .invalidAudience, by: verifier)
        assertRejected(Fixtures.audArrayMixed, .invalidAudience, by: verifier)
        assertRejected(Fixtures.audNumber, .invalidAudience, by: verifier)
        // Tokens without the claims at all.
        assertRejected(Fixtures.hs256, .invalidIssuer, by: verifier)
        assertRejected(Fixtures.hs256, .invalidAudience, by: try bound(issuer: nil))
        assertRejected(Fixtures.rs256, .invalidIssuer, by: verifier)
        // Only what is set is checked.
        XCTAssertEqual(try bound(audience: nil).verify(Fixtures.otherAudience, now: now).uid, "user-1")
        XCTAssertEqual(try bound(issuer: nil).verify(Fixtures.otherIssuer, now: now).uid, "user-1")
        XCTAssertEqual(try bound(issuer: nil, audience: nil).verify(Fixtures.audNumber, now: now).uid, "user-1")
        // The signature is checked before the claims: a forged token is badSignature whatever its claims.
        assertRejected(Fixtures.hs256WrongSecret, .badSignature, by: verifier)
    }

    func testIssuerAndAudienceComparedByteForByte() throws {
        // The token says "https://\u{212A}ate.example" (KELVIN SIGN) and "caf\u{E9}" (precomposed): Swift's String
        // equality calls them equal to "https://Kate.example" and "cafe\u{301}"; the verifier does not.
        XCTAssertEqual("https://\u{212A}ate.example", "https://Kate.example")
        XCTAssertEqual("caf\u{E9}", "cafe\u{301}")
        assertRejected(Fixtures.issAudKelvin, .invalidIssuer, by: try bound(issuer: "https://Kate.example", audience: nil))
        assertRejected(Fixtures.issAudKelvin, .invalidAudience, by: try bound(issuer: nil, audience: "cafe\u{301}"))
        let exact = try bound(issuer: "https://\u{212A}ate.example", audience: "caf\u{E9}")
        XCTAssertEqual(try exact.verify(Fixtures.issAudKelvin, now: now).uid, "user-1")
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
                                    .notYetValid, .missingExpiry, .invalidClaim("exp"), .invalidClaim("uid"),
                                    .invalidIssuer, .invalidAudience, .missingUID]
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
        let long = String(repeating: "s", count: 32)
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
        XCTAssertTrue(message(object(["alg": .string("HS256"), "kid": .string(""), "secret": .string(long)])).contains("'kid'"))
        XCTAssertTrue(message(object(["alg": .string("HS256"), "kid": .number("1"), "secret": .string(long)])).contains("'kid'"))
        XCTAssertTrue(message(object(["alg": .string("HS256"), "secret": .string(long), "publicKeyPEM": .string("x")])).contains("unknown field 'publicKeyPEM'"))
        XCTAssertTrue(message(object(["alg": .string("RS256"), "publicKeyPem": .string("x")])).contains("unknown field 'publicKeyPem'"))
        XCTAssertTrue(message(object(["alg": .string("RS256")])).contains("'publicKeyPEM' is required"))
        XCTAssertTrue(message(object(["alg": .string("ES256"), "publicKeyPEM": .bool(true)])).contains("'publicKeyPEM' must be a string"))
        XCTAssertTrue(message(object(["alg": .string("RS256"), "publicKeyPEM": .string("garbage")])).contains("'publicKeyPEM'"))
        XCTAssertTrue(message(object(["alg": .string("RS256"), "publicKeyPEM": .string(Fixtures.es1PEM)])).contains("'publicKeyPEM'"))
        XCTAssertTrue(message(object(["alg": .string("ES256"), "publicKeyPEM": .string(Fixtures.rs1PEM)])).contains("not an EC key"))
        XCTAssertTrue(message(object(["alg": .string("ES256"), "publicKeyPEM": .string(Fixtures.p384PEM)])).contains("P-256"))
        // Secrets are never echoed.
        XCTAssertFalse(message(object(["alg": .string("HS256"), "secretBase64": .string("topsecret!")])).contains("topsecret"))

        // Valid forms (32 bytes or more).
        let binary: [UInt8] = [0x00, 0xFF, 0x01, 0x02] + Array(repeating: 0xAB, count: 28)
        let padded = Data(binary).base64EncodedString()
        XCTAssertTrue(padded.hasSuffix("="))
        guard case .hs256(let kid, let secret) = try AuthKey.parse(object(["alg": .string("HS256"), "secretBase64": .string(padded)])) else {
            return XCTFail("expected HS256")
        }
        XCTAssertNil(kid)
        XCTAssertEqual(secret, binary)
        let unpaddedText = String(padded.prefix { $0 != "=" })
        guard case .hs256(_, let unpadded) = try AuthKey.parse(object(["alg": .string("HS256"), "secretBase64": .string(unpaddedText)])) else {
            return XCTFail("expected HS256")
        }
        XCTAssertEqual(unpadded, binary)
        let accented = String(repeating: "é", count: 16)  // 16 characters, 32 UTF-8 bytes
        guard case .hs256(_, let text) = try AuthKey.parse(object(["alg": .string("HS256"), "secret": .string(accented)])) else {
            return XCTFail("expected HS256")
        }
        XCTAssertEqual(text, Array(accented.utf8))
        let parsed = try JSONParser.parse(#"{"alg":"ES256","kid":"k3","publicKeyPEM":"\#(Fixtures.es1PEM.replacingOccurrences(of: "\n", with: "\\n"))"}"#)
        let key = try AuthKey.parse(parsed)
        XCTAssertEqual(key.kid, "k3")
        XCTAssertEqual(key.algorithm, .es256)
    }

    func testShortHS256SecretsRefused() throws {
        func message(_ settings: [ExactString: JSONValue]) -> String {
            do {
                _ = try AuthKey.parse(.object(settings))
                return "accepted"
            } catch {
                return error.message
            }
        }
        XCTAssertEqual(AuthKey.minimumHS256SecretLength, 32)
        // 31 bytes refused (text and base64), whatever the number of characters; 32 accepted.
        for short in ["s", "0123456789abcdef0123456789abcde", String(repeating: "é", count: 15) + "x"] {
            XCTAssertLessThan(short.utf8.count, 32)
            let refused = message(["alg": .string("HS256"), "secret": .string(short)])
            XCTAssertTrue(refused.contains("shorter than 32 bytes"), refused)
            XCTAssertTrue(short.count == 1 || !refused.contains(short), "the secret is never echoed")
        }
        let base64Short = Data(repeating: 7, count: 31).base64EncodedString()
        XCTAssertTrue(message(["alg": .string("HS256"), "secretBase64": .string(base64Short)]).contains("shorter than 32 bytes"))
        XCTAssertEqual(message(["alg": .string("HS256"), "secret": .string("0123456789abcdef0123456789abcdef")]), "accepted")
        XCTAssertEqual(message(["alg": .string("HS256"), "secretBase64": .string(Data(repeating: 7, count: 32).base64EncodedString())]), "accepted")
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
    static let hs2SecretBase64 = "HUGIj3kSwQrRM5R3egnYSFvp6PUwBxIpocxSB69MaR0="
    static let rs1PEM = """
        -----BEGIN PUBLIC KEY-----
        MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAkaBQLTDjY5GgRVl7FT/F
        qESbn+z/QH8zurUPrf7r7cmeWVG/N69cCsToTqFOcE5mXA/HVcLZPmCb6totv+wl
        OJaTK4mClFvUwKDxOLV+R/5TfFut6DLgABHE3810cehN8WHzo6qZFhncHJNLnplh
        SmeSLbWTNAQZm+Lk7qsBcRdl11C7R6keXZKwRVJk7z1F6AuqeTMmTAELV1tcvMES
        K5pW6e7FHFHg23fEcTKbktNQoy0l0GPMWn7iFxAV7uS0N520ltvh290jD5BkoVEH
        t8dfYHTYNtsOr+jrBFDAD42CQRkAaaVXqcu1/hTktuiVDWdlEPVB7z8C+0G6J0h4
        ywIDAQAB
        -----END PUBLIC KEY-----

        """
    static let rs2PEM = """
        -----BEGIN PUBLIC KEY-----
        MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAm5iJVlYluxx0z/36Pv5V
        NuvHOGzvVWyyXlHOturWDvCElpBlhCqzcd6iu4zGntiFYrkdGQtd1hW5+zLI/VVT
        8blua7bMoyQ5aRxVfYPoJU8vB160l02PL8dN7OIx7eqWTq1qAqQ8Eb1MIBm5Oixi
        CUfcs2dGhA5/O7nFpoRvKAP057OkAEwtj8UCzdXlHipEh5F2F+e0quhRaeANKqxW
        A9uZnd0qSdYmOlz6JYCmP8YfokTEa1/mq/go691u26xr204d4aezAk87ZxR8dRVY
        qeFBLaoldNW2tOpNPkLz/V4hQjH+OSc7cPSl5QgQ3AjCT66B8TFhkDhh5gcc2DhO
        VQIDAQAB
        -----END PUBLIC KEY-----

        """
    static let es1PEM = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEXFeDYyiL1n+i0O9CRtKtrGtToW5D
        CxYEZwf7Ac4KuQBM0dLhmYWfyQ3HcSFVVqeGzycuJqninDMDqGg9/NHaww==
        -----END PUBLIC KEY-----

        """
    static let es2PEM = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEeVm52Gzo7jBAhb/BWg90JWE52npq
        weMizb4fY3yWwjKNGhgODEd1dTOrwJFUAkw2A1miFTtQ7rZdYJRbNjWsWQ==
        -----END PUBLIC KEY-----

        """
    static let p384PEM = """
        -----BEGIN PUBLIC KEY-----
        MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEk6X7mK4vNtvvescym5WUWv/tJAdqCEMQ
        YBi3DHqHWIjfDmV81dKrroDUzv6ZDFHWzQpM89dqd2knjZHhbOEEdYZAiac1I31W
        aUSz3mO9gbz+1RAs35Q7x794gZ3FsgiW
        -----END PUBLIC KEY-----

        """
    static let secp256k1PEM = """
        -----BEGIN PUBLIC KEY-----
        MFYwEAYHKoZIzj0CAQYFK4EEAAoDQgAEjo73GuZuTBbDJV7qHBSwwt6Q0IyiRXen
        T+craqeTrgk/XF/6gYhlSbqwudmA1nNDM+djvzM9+42ORG0qbUXytA==
        -----END PUBLIC KEY-----

        """
    static let ecMessage = "ECPublicKey fixture message"
    static let ecRawSignatureB64URL = "BUzQVqgZ093rBx4NtMu1pt04T2fVSaCBnEwWo6M8rB0BQSwq0OO4zxwYhn4GE6vfgCC_YgKStVeb_jj6gu_veA"
    static let hs256 = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJzdWIiOiJzdWJqZWN0LTEiLCJleHAiOjQxMDI0NDQ4MDAsImlhdCI6MTcwMDAwMDAwMCwic2NvcGUiOiJwdXNoIn0.hNe7CCiGECpnnVSMTpE4b0csnl03sgRXmj7mHar1RNU"
    static let hs256Binary = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTIiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJ1c2VyLTIiLCJleHAiOjQxMDI0NDQ4MDB9.JYLhFAqhkQjHuR3f5SQUhyZ5s5Hj9TdAmexOG1aHT8g"
    static let hs256NoKid = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLTIiLCJleHAiOjQxMDI0NDQ4MDB9.ZiZXLZWdX-jUq3wrIqSR2S9VTEWKsrOv15Wr1oO4fOU"
    static let rs256 = "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzLTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJ1c2VyLXJzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.YlL4bF_u27xZJmKst8NVS04DlTVwNsVilDE2_ny9qrCLMxk9EEsyxw-B2DV_Il00nTeO5ynVySNrNOf5ls5UzUo_WRtdAgGOHmQ5nJz9gN5OvF1cMatcpl1vVGnb9OkghERUFwEu80ubDhJGQuWLCqNEdDVrBpEzl7AyJ7m3WX6H_YtSAOnXdiWA4RtxjSIzkFNvo6sjzb5d79Mm9x1GQyfFrZs61or1axBYJs8imnD257ncfleQBPtW2wCnoyahwGArnZs_U1eoaFMNHK5l8HaQtIAPQu2bpqMMsJkcZ4nGz9SRNeXpXPhKu4OEqVWyrfcK85w-zl-xunMottNv4g"
    static let rs256NoKidKey2 = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyLXJzMiIsImV4cCI6NDEwMjQ0NDgwMH0.YoMaD8Rc0Hqg9BLLuoY8GrSpY9S1er-cf8_swp_rZGNdNZ6sUgsIqkK9gxDGQgHy8m7k8xqvlyY-vxaYIKLtZmUQniNk-l1B608kbwYBHNW2EzNlM2XwAoEG1dkmdXqIybd_ZEu7O6LKaOKl8ebgx9SOOVOJq3THjO8ThBMMFjx6eNxvkvujMntkHqm9wP3cyoHz5VmHud8uUMQVaKpSgVRnK6_ZMZwNmzroB8kD3UL5eL_08e2upvwzSTdeP3U_yXk-juO9yBJVuGnPyb0_jh49SjFEc9UjHMt2ATmyu9IUC1zYQcuV43efijFit8LpVfj09fZCIDfoNNbRQWzcdQ"
    static let es256 = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImVzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLWVzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.AI0nC2u_yF6InC8cIlMvSDdI6-ZT-XiBWnuO7sbOTy8y-iUDDMirEndrJUE6MLV0QZxS1cbc41QbJ9GmBHOuCg"
    static let es256NoKid = "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1aWQiOiJ1c2VyLWVzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.4B63HhySS7EWYXIdZCQuYpkogGMUlXKHTW9l-7ewBlQNi8iJQf_7BvH_IhFLoAnmG2Ynw61fBeWwWsBUyjJp7Q"
    static let rs256SignedByKey2WithKid1 = "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzLTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJ1c2VyLXJzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.P12OWAIKc4pit3WkTO0398nArXvZUfHtHCwjBH4A62E9FJqOnmE7NbeaTcx0qSk7hzedKalOPlqlXYGjv0HLgBAXVq2et6EGDIIQPLGxaWkHiY7KyTHaqJlzzqPBrdPBx6uBN6IM1l2yDz4tjAjJvm-2x6dJi_7c1aau7PXGfgqUg119HT6NsfEHJ_MqTwns72A7SWu-onWep_uiLd5D0D8NBkUUU-vcOIWA8dwsIFzvnP1QeExdBzPq4NjnZiQOuFLi91hHOkBjzzzwbsuEQIkuYtTMF47a2rOHuYKptysdYiH08ETqQI2P0etsAh7yOlj2JAO1imIqnrT2tnvA0w"
    static let es256SignedByKey2WithKid1 = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImVzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLWVzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.S33sKSm5wNC6ceKqS9rOevZkMu3Kl9kuOHO2vLmVT4Ei0DQo1lQ6LnEqKMK_SWYfd80r-FCxsycctTEnLoKLzw"
    static let hs256WrongSecret = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJzdWIiOiJzdWJqZWN0LTEiLCJleHAiOjQxMDI0NDQ4MDAsImlhdCI6MTcwMDAwMDAwMCwic2NvcGUiOiJwdXNoIn0.fWfdTekT5KPY7sLamlovyzKOMmIwqeOTVUGN1WvAgjU"
    static let rs256UnknownKid = "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzLTkiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJ1c2VyLXJzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.kIxoXYvSPaLTfbrywLEC3QDkgwlDrB8I93-pQhYyjvrTP7ASey86pjcJfsKdprTNt9GtOmsrXFrO_9nV_Sh5jsyiq2iL8C0e4r8sKNQ8oZuhR2PydtRUM8YwiLWvIW3RDGO1PVaITBsDYmxb-vXIyWbUCn8EGSX_PQJTjH0qgmHt7ai1YDx-68bs7A-UGMP3RJqcY9lrU4LXLlyJlvGdFfPVFBj06Uz6DpHfBD7h_Hzqw_5WsQuTuPsPdpHk8GtnIJvJYNUR4bb6lGb_ZQ1vOp6I4iyyzYmxb0HbuS5Hl0Nj49EUXFlrDEDmjSRvlHJdbtFSaX25nAuwHzUGadI0Rw"
    static let es256WithRSAKid = "eyJhbGciOiJFUzI1NiIsImtpZCI6InJzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLWVzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.voeS1GPcsp6zyU248Svqe5vL_261FUOPdnzmxdntgQ0pG0JJrp8NZTX6WhzxTw-hTOMyS6iY5ko5VkLloEcJKA"
    static let es256DERSignature = "eyJhbGciOiJFUzI1NiIsImtpZCI6ImVzLTEifQ.eyJ1aWQiOiJ1c2VyLWVzIiwiZXhwIjo0MTAyNDQ0ODAwfQ.MEYCIQC2a5C9jMfxIyfYugfP3vUVn_oBcY_szR3T1XbN7mn63wIhAP2lf0SfoBFqkTVjSt-UedL5bOFbdLd_a7qKOm1mPyfX"
    static let algNone = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJ1aWQiOiJyb290IiwiZXhwIjo0MTAyNDQ0ODAwfQ."
    static let hs512 = "eyJhbGciOiJIUzUxMiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDB9.tpNeKFcZ0wrkOLjgSbOlpojZCSJ6BuJOIYnjbIps9hCezjyEnmRpuv7R3BY6qo5SkEOLSVOWAEBvXkGuxRH81Q"
    static let confusionRSAPEMKid = "eyJhbGciOiJIUzI1NiIsImtpZCI6InJzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJyb290IiwiZXhwIjo0MTAyNDQ0ODAwfQ.RL4cUct-VSJO-psZE1vuNN4yh-Yw4u9loMubRnW8BBY"
    static let confusionRSAPEMNoKid = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ1aWQiOiJyb290IiwiZXhwIjo0MTAyNDQ0ODAwfQ.FYqT8q7hlREn2jstvsZzymCZmP5_NAUABIkd-qYgjQQ"
    static let confusionECPEMNoKid = "eyJhbGciOiJIUzI1NiJ9.eyJ1aWQiOiJyb290IiwiZXhwIjo0MTAyNDQ0ODAwfQ.Zb5TgGRiSTpNjZLx_G4kkjUAdmSHVmxUvHuFME8dtxU"
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
    static let uidNullSub = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOm51bGwsInN1YiI6InN1YmplY3QtNCIsImV4cCI6NDEwMjQ0NDgwMH0.8ZbgBLM-YT7aFRtLwB7cAcWcykjvUqrApj1v4H4Q2Bo"
    static let noUID = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJuYW1lIjoibm9ib2R5IiwiZXhwIjo0MTAyNDQ0ODAwfQ.2YZguZr5Rg3WaKmX060sQ0zqKAVriZDBsc5ltmYNJo8"
    static let issAud = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsImlzcyI6Imh0dHBzOi8vaXNzdWVyLmV4YW1wbGUvcHJvamVjdC0xIiwiYXVkIjoicHJvamVjdC0xIn0.zDzRD5Q226W7rfB0KHXMEvPd_06Aa9AexaV7WLobHxQ"
    static let issAudArray = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsImlzcyI6Imh0dHBzOi8vaXNzdWVyLmV4YW1wbGUvcHJvamVjdC0xIiwiYXVkIjpbIm90aGVyIiwicHJvamVjdC0xIl19.jgBO-WEeznSyV35Wh8N6FA_cgqoB6e3ZhxwB-fLNvVg"
    static let rs256IssAud = "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzLTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJ1c2VyLXJzIiwiZXhwIjo0MTAyNDQ0ODAwLCJpc3MiOiJodHRwczovL2lzc3Vlci5leGFtcGxlL3Byb2plY3QtMSIsImF1ZCI6WyJwcm9qZWN0LTEiXX0.CAn08j687iuKSO9s0UFrTmT5PiUM3xD9FvQqTj8eUu05Iwx7hEULfAxUngReelRvj15ZYQK0uA2SgOwLk6Td_oNUo7YsqacHgNfZNvFzlXpwDac3tpqv6xD2fVmUbHYyv7mksYzsn6UjpQ8kJzjIrAYK5wrdxGQN4wjc5qDCg7EsIXT_6xWdN6i07Pw74JflPo1WDCFaSsLGgwhBP9oKH4QFifnP1QAWYnVEKcod2L36_8A61Etpjl4H3VQ9wvZ-sg0kugTJzGT1D3Fxuke6C6HJbpbTkM-P_bU2w-E7an2DoQRotb4ivgeqPHOHafsNYKzY4YRiits0rOVbZsw4pQ"
    static let otherIssuer = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsImlzcyI6Imh0dHBzOi8vaXNzdWVyLmV4YW1wbGUvcHJvamVjdC0yIiwiYXVkIjoicHJvamVjdC0xIn0.7NxyIaWVl3aZNmQvnjiOKy6MIWSH4ZVYPD7f0ZCPKHY"
    static let otherAudience = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsImlzcyI6Imh0dHBzOi8vaXNzdWVyLmV4YW1wbGUvcHJvamVjdC0xIiwiYXVkIjoicHJvamVjdC0yIn0.wZtzFv2_uG1D-wycFuYaNsLILPTYoBl-xhAiaBxnjTU"
    static let audArrayWithout = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsImlzcyI6Imh0dHBzOi8vaXNzdWVyLmV4YW1wbGUvcHJvamVjdC0xIiwiYXVkIjpbInByb2plY3QtMiIsInByb2plY3QtMyJdfQ.SldeP5ixhFN6LaaxnqvbN3owR_hIZVD8wE1IiL-cdAk"
    static let audArrayEmpty = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsImlzcyI6Imh0dHBzOi8vaXNzdWVyLmV4YW1wbGUvcHJvamVjdC0xIiwiYXVkIjpbXX0.xLi4j_ON81o2NK_IHRa6TvF141PBf2jsLASZ9bxnAdo"
    static let audArrayMixed = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsImlzcyI6Imh0dHBzOi8vaXNzdWVyLmV4YW1wbGUvcHJvamVjdC0xIiwiYXVkIjpbInByb2plY3QtMSIsN119.55nhKcQKuVQ84e86rNOhdfNmeH1Y-vjviBq5AjD-d8E"
    static let audNumber = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsImlzcyI6Imh0dHBzOi8vaXNzdWVyLmV4YW1wbGUvcHJvamVjdC0xIiwiYXVkIjo3fQ.FqbeUFp3tzOKr_lpJHwA0tlstW_l0oPdWuDm-rWLbic"
    static let issNumber = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsImlzcyI6NywiYXVkIjoicHJvamVjdC0xIn0.1PAqVWnKbWfAwQ0BYlfLC2H8j5ansS2cJRc8ct5C11A"
    static let issAudKelvin = "eyJhbGciOiJIUzI1NiIsImtpZCI6ImhzLTEiLCJ0eXAiOiJKV1QifQ.eyJ1aWQiOiJ1c2VyLTEiLCJleHAiOjQxMDI0NDQ4MDAsImlzcyI6Imh0dHBzOi8vXHUyMTJhYXRlLmV4YW1wbGUiLCJhdWQiOiJjYWZcdTAwZTkifQ.kZ2nMM_NfPR5pUlPmR1DTCBPDXjRCWqIRl-9j5ChIjM"
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
