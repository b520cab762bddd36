import Providers
import SSLCrypto
import Synchronization
import XCTest

final class APNsProviderTokenTests: XCTestCase {
    private final class Clock: Sendable {
        let now = Mutex<Double>(1_800_000_000.7)
        func advance(minutes: Double) { now.withLock { $0 += minutes * 60 } }
        func read() -> Double { now.withLock { $0 } }
    }

    private func parts(_ token: String) throws -> (header: String, claims: String, signature: [UInt8], signed: [UInt8]) {
        let pieces = token.split(separator: ".").map(String.init)
        XCTAssertEqual(pieces.count, 3)
        let decode = { (text: String) throws -> [UInt8] in try XCTUnwrap(Base64URL.decode(text)) }
        return (
            String(decoding: try decode(pieces[0]), as: UTF8.self), String(decoding: try decode(pieces[1]), as: UTF8.self),
            try decode(pieces[2]), Array("\(pieces[0]).\(pieces[1])".utf8))
    }

    func testTheTokenIsAnES256JWTOfTheTeamAndKeySignedWithTheP8Key() throws {
        // A .p8 file is a PKCS#8 PEM of a P-256 key.
        let p8 = try ECPrivateKey().pemRepresentation()
        XCTAssertTrue(p8.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let key = try ECPrivateKey(pem: p8)
        let clock = Clock()
        let tokens = APNsProviderToken(teamID: "TEAM123456", keyID: "KEY987654", key: key, clock: clock.read)
        let token = try tokens.token()
        let (header, claims, signature, signed) = try parts(token)
        XCTAssertEqual(header, #"{"alg":"ES256","kid":"KEY987654"}"#)
        XCTAssertEqual(claims, #"{"iss":"TEAM123456","iat":1800000000}"#)
        XCTAssertTrue(key.publicKey.verifyES256(signature: signature, message: signed))
    }

    func testOneTokenServesFiftyMinutesThenANewOneIsMade() throws {
        let clock = Clock()
        let tokens = APNsProviderToken(teamID: "T", keyID: "K", key: try ECPrivateKey(), clock: clock.read)
        let first = try tokens.token()
        clock.advance(minutes: 49)
        XCTAssertEqual(try tokens.token(), first)
        clock.advance(minutes: 1)
        let second = try tokens.token()
        XCTAssertNotEqual(second, first)
        XCTAssertEqual(try parts(second).claims, #"{"iss":"T","iat":1800003000}"#)
        clock.advance(minutes: 10)
        XCTAssertEqual(try tokens.token(), second)
    }

    func testARefusedTokenIsReplacedOnlyOnceItIsTwentyMinutesOld() throws {
        let clock = Clock()
        let tokens = APNsProviderToken(teamID: "T", keyID: "K", key: try ECPrivateKey(), clock: clock.read)
        let first = try tokens.token()
        clock.advance(minutes: 5)
        XCTAssertFalse(tokens.refused(first), "younger than 20 minutes: renewing would break Apple's limit")
        XCTAssertEqual(try tokens.token(), first)
        clock.advance(minutes: 15)
        XCTAssertFalse(tokens.refused("another token"), "not the current token: nothing to drop")
        XCTAssertTrue(tokens.refused(first))
        let second = try tokens.token()
        XCTAssertNotEqual(second, first)
        XCTAssertFalse(tokens.refused(first), "an old token refused late changes nothing")
        XCTAssertEqual(try tokens.token(), second)
    }
}
