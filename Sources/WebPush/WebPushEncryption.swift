import SSLCrypto

/// Message encryption for Web Push (RFC 8291) with the `aes128gcm` content coding (RFC 8188), over libssl.
///
/// The application server draws an ephemeral P-256 key and a 16-byte salt per message, agrees a secret with the
/// browser's key (`p256dh`) by ECDH, mixes in the browser's `auth` secret, and encrypts the message as one record:
/// `salt(16) ‖ rs(4) ‖ idlen(1)=65 ‖ keyid = the ephemeral public key(65) ‖ AES-128-GCM(plaintext ‖ 0x02) ‖ tag(16)`.
public enum WebPushEncryption {
    /// The record size written in the header: one record carries the whole message.
    public static let recordSize: UInt32 = 4096
    public static let saltByteCount = 16
    public static let authSecretByteCount = 16
    /// The header: salt, record size, key id length, key id (an uncompressed P-256 point).
    public static let headerByteCount = 16 + 4 + 1 + 65
    /// The largest plaintext a push service must accept: a 4096-byte body less the header, the tag and the
    /// delimiter (RFC 8291 §4).
    public static let maximumPlaintextByteCount = 4096 - headerByteCount - AES128GCM.tagByteCount - 1

    /// Encrypts `plaintext` for the browser whose key is `userAgentKey` (its `p256dh`) and whose secret is
    /// `authSecret` (its `auth`, 16 bytes). `senderKey` and `salt` are drawn afresh unless given (tests, and RFC
    /// 8291's example, give them).
    public static func encrypt(
        _ plaintext: [UInt8], userAgentKey: ECPublicKey, authSecret: [UInt8],
        senderKey: ECPrivateKey? = nil, salt: [UInt8]? = nil
    ) throws -> [UInt8] {
        guard authSecret.count == authSecretByteCount else { throw WebPushError("the auth secret must be 16 bytes") }
        guard plaintext.count <= maximumPlaintextByteCount else {
            throw WebPushError("the message is \(plaintext.count) bytes; at most \(maximumPlaintextByteCount) fit a push message")
        }
        let salt = try salt ?? SecureRandom.bytes(saltByteCount)
        guard salt.count == saltByteCount else { throw WebPushError("the salt must be 16 bytes") }
        let sender = try senderKey ?? ECPrivateKey()
        let senderPoint = try sender.publicKey.uncompressedPoint
        let (key, nonce) = try contentKeys(
            secret: sender.sharedSecret(with: userAgentKey), authSecret: authSecret,
            userAgentPoint: userAgentKey.uncompressedPoint, senderPoint: senderPoint, salt: salt)
        let sealed = try AES128GCM.seal(plaintext + [0x02], key: key, iv: nonce)
        var body: [UInt8] = []
        body.reserveCapacity(headerByteCount + sealed.ciphertext.count + sealed.tag.count)
        body += salt
        body += [UInt8(recordSize >> 24), UInt8((recordSize >> 16) & 0xff), UInt8((recordSize >> 8) & 0xff), UInt8(recordSize & 0xff)]
        body.append(UInt8(senderPoint.count))
        body += senderPoint
        body += sealed.ciphertext
        body += sealed.tag
        return body
    }

    /// Decrypts a message as the browser does, with its private key and `auth` secret: every record of the body,
    /// its padding removed (what `push-gateway decode` and the tests use).
    public static func decrypt(_ body: [UInt8], userAgentKey: ECPrivateKey, authSecret: [UInt8]) throws -> [UInt8] {
        guard authSecret.count == authSecretByteCount else { throw WebPushError("the auth secret must be 16 bytes") }
        guard body.count >= 21 else { throw WebPushError("the body is shorter than its header") }
        let salt = Array(body[0..<16])
        let recordSize = body[16..<20].reduce(0) { $0 << 8 | Int($1) }
        let idLength = Int(body[20])
        guard body.count >= 21 + idLength else { throw WebPushError("the body is shorter than its header") }
        let senderPoint = Array(body[21..<(21 + idLength)])
        guard recordSize > AES128GCM.tagByteCount + 1 else { throw WebPushError("record size \(recordSize) is too small") }
        let senderKey: ECPublicKey
        do {
            senderKey = try ECPublicKey(uncompressedPoint: senderPoint)
        } catch {
            throw WebPushError("the key id is not the sender's P-256 public key")
        }
        let (key, baseNonce) = try contentKeys(
            secret: userAgentKey.sharedSecret(with: senderKey), authSecret: authSecret,
            userAgentPoint: userAgentKey.publicKey.uncompressedPoint, senderPoint: senderPoint, salt: salt)
        var plaintext: [UInt8] = []
        var offset = 21 + idLength
        var sequence: UInt64 = 0
        guard offset < body.count else { throw WebPushError("the body has no record") }
        while offset < body.count {
            let end = min(offset + recordSize, body.count)
            let record = body[offset..<end]
            guard record.count > AES128GCM.tagByteCount else { throw WebPushError("record \(sequence) is truncated") }
            var nonce = baseNonce
            for index in 0..<8 { nonce[4 + index] ^= UInt8((sequence >> (56 - 8 * UInt64(index))) & 0xff) }
            let split = record.endIndex - AES128GCM.tagByteCount
            var padded: [UInt8]
            do {
                padded = try AES128GCM.open(Array(record[..<split]), tag: Array(record[split...]), key: key, iv: nonce)
            } catch {
                throw WebPushError("record \(sequence) does not decrypt (wrong keys, or altered)")
            }
            let isLast = end == body.count
            // Padding: zeros after the delimiter, 0x02 for the last record and 0x01 for the others.
            while let last = padded.last, last == 0 { padded.removeLast() }
            guard let delimiter = padded.popLast(), delimiter == (isLast ? 0x02 : 0x01) else {
                throw WebPushError("record \(sequence) has no valid padding delimiter")
            }
            plaintext += padded
            offset = end
            sequence += 1
        }
        return plaintext
    }

    /// The content encryption key and the nonce (RFC 8291 §3.3–3.4, RFC 8188 §2.2–2.3).
    static func contentKeys(
        secret: [UInt8], authSecret: [UInt8], userAgentPoint: [UInt8], senderPoint: [UInt8], salt: [UInt8]
    ) throws -> (key: [UInt8], nonce: [UInt8]) {
        let keyInfo = Array("WebPush: info".utf8) + [0] + userAgentPoint + senderPoint
        let ikm = try HKDF.sha256(salt: authSecret, inputKeyingMaterial: secret, info: keyInfo, length: 32)
        let prk = try HKDF.extract(salt: salt, inputKeyingMaterial: ikm)
        let key = try HKDF.expand(pseudorandomKey: prk, info: Array("Content-Encoding: aes128gcm".utf8) + [0], length: 16)
        let nonce = try HKDF.expand(pseudorandomKey: prk, info: Array("Content-Encoding: nonce".utf8) + [0], length: 12)
        return (key, nonce)
    }
}

/// A Web Push message or key that cannot be built or read; the message says why.
public struct WebPushError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = "Web Push: " + description }
}
