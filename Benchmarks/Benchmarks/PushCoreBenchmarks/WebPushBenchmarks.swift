import Benchmark
import SSLCrypto
import WebPush

/// The cost per message of Web Push encryption (issue 21): RFC 8291 draws an ephemeral P-256 key and a salt per
/// message, agrees Z with the browser's `p256dh` by ECDH, derives the key and nonce with four HMACs, and seals the
/// message with AES-128-GCM. The browser's key is read from its 65-byte point per message, as a sender would from the
/// subscription. The VAPID header is signed once per push service origin and reused, but its cost is shown too.
func webPushBenchmarks() {
    let browser: ECPrivateKey
    let point: [UInt8]
    let signer: VAPIDSigner
    do {
        browser = try ECPrivateKey()
        point = try browser.publicKey.uncompressedPoint
        signer = try VAPIDSigner(key: ECPrivateKey(), subject: "mailto:ops@example.com")
    } catch {
        fatalError("keys: \(error)")
    }
    let auth = [UInt8](repeating: 7, count: 16)
    // A v2 payload of the usual size (the value event of the other benchmarks is about 300 bytes encoded).
    let message = [UInt8](repeating: 0x61, count: 300)

    Benchmark("Web Push: encrypt a 300-byte message (RFC 8291, browser key read from its point)") { benchmark in
        for _ in benchmark.scaledIterations {
            let key = try ECPublicKey(uncompressedPoint: point)
            blackHole(try WebPushEncryption.encrypt(message, userAgentKey: key, authSecret: auth))
        }
    }
    Benchmark("Web Push: VAPID header (ES256 JWT), signed once per origin and reused") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try signer.authorization(audience: "https://push.example.net", expiresAt: 1_800_000_000))
        }
    }
}
