import Foundation
import SSLCrypto
import TestSupport
import WebPush
import XCTest

extension PythonInterop {
    /// `tests/interop/webpush_interop.py`: http_ece (RFC 8291 / RFC 8188) and joserfc (the VAPID JWT).
    static let webPush = PythonInterop(script: "tests/interop/webpush_interop.py", modules: "http_ece cryptography joserfc")
}

/// Interop with independent implementations: what this gateway encrypts, http_ece decrypts with the browser's keys;
/// what http_ece encrypts (one record, or many small ones with their padding), this module decrypts; the VAPID
/// header verifies with joserfc from its `k` key alone. Skipped only when python3 or those modules are missing.
final class WebPushInteropTests: XCTestCase {
    private struct Browser {
        let key: ECPrivateKey
        /// Its scalar, base64url: what the Python side decrypts with.
        let d: String
        let publicPoint: String
        let auth: String
    }

    private func browser() throws -> Browser {
        let result = try PythonInterop.webPush.run([["op": "browser"]])[0]
        let d = try XCTUnwrap(PythonInterop.string(result, "d"))
        let publicPoint = try XCTUnwrap(PythonInterop.string(result, "public"))
        let point = try XCTUnwrap(Base64URL.decode(publicPoint))
        let key = try ECPrivateKey(d: XCTUnwrap(Base64URL.decode(d)), x: Array(point[1...32]), y: Array(point[33...64]))
        return Browser(key: key, d: d, publicPoint: publicPoint, auth: try XCTUnwrap(PythonInterop.string(result, "auth")))
    }

    func testWhatTheGatewayEncryptsHttpEceDecryptsWithTheBrowsersKeys() throws {
        let browser = try browser()
        let messages: [[UInt8]] = [
            Array(#"{"v":2,"t":"app","p":"/users/1","e":"é"}"#.utf8), [], [UInt8](repeating: 0x7a, count: 3993),
        ]
        var ops: [[String: Any]] = []
        for message in messages {
            let body = try WebPushEncryption.encrypt(
                message, userAgentKey: browser.key.publicKey, authSecret: XCTUnwrap(Base64URL.decode(browser.auth)))
            ops.append(["op": "decrypt", "d": browser.d, "public": browser.publicPoint, "auth": browser.auth, "body": Base64URL.encode(body)])
        }
        let results = try PythonInterop.webPush.run(ops)
        for (message, result) in zip(messages, results) {
            let plaintext = try XCTUnwrap(PythonInterop.string(result, "plaintext"))
            XCTAssertEqual(Base64URL.decode(plaintext), message)
        }
    }

    func testWhatHttpEceEncryptsTheGatewayDecryptsInOneRecordOrMany() throws {
        let browser = try browser()
        let message = Array(#"{"v":2,"t":"app","p":"/a/b","long":"\#(String(repeating: "x", count: 300))"}"#.utf8)
        let results = try PythonInterop.webPush.run([4096, 18, 100].map { rs in
            ["op": "encrypt", "public": browser.publicPoint, "auth": browser.auth, "plaintext": Base64URL.encode(message), "rs": rs]
        })
        for result in results {
            let body = try XCTUnwrap(Base64URL.decode(try XCTUnwrap(PythonInterop.string(result, "body"))))
            XCTAssertEqual(
                try WebPushEncryption.decrypt(body, userAgentKey: browser.key, authSecret: XCTUnwrap(Base64URL.decode(browser.auth))),
                message)
        }
    }

    func testTheVAPIDHeaderVerifiesWithJoserfcFromItsKeyAlone() throws {
        let signer = try VAPIDSigner(key: ECPrivateKey(), subject: "mailto:ops@example.com")
        let audience = "https://push.example.net"
        let expiresAt = Int64(Date().timeIntervalSince1970) + 12 * 3600
        let other = try VAPIDSigner(key: ECPrivateKey(), subject: "mailto:ops@example.com")
        let forged = try signer.authorization(audience: audience, expiresAt: expiresAt)
            .replacingOccurrences(of: "k=\(signer.publicKey)", with: "k=\(other.publicKey)")
        let results = try PythonInterop.webPush.run([
            ["op": "vapid_verify", "authorization": try signer.authorization(audience: audience, expiresAt: expiresAt), "audience": audience],
            ["op": "vapid_verify", "authorization": forged, "audience": audience],
        ])
        XCTAssertEqual(results[0]["valid"] as? Bool, true, "\(results[0])")
        let claims = try XCTUnwrap(results[0]["claims"] as? [String: Any])
        XCTAssertEqual(claims["sub"] as? String, "mailto:ops@example.com")
        XCTAssertEqual((claims["exp"] as? NSNumber)?.int64Value, expiresAt)
        XCTAssertEqual(results[1]["valid"] as? Bool, false, "a token checked against another key")
    }
}
