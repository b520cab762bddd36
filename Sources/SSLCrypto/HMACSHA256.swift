import COpenSSL

/// HMAC with SHA-256 (RFC 2104; JWS `HS256`).
public enum HMACSHA256 {
    public static let byteCount = 32

    /// Returns the 32-byte HMAC-SHA-256 of `message` under `key`.
    public static func authenticationCode(for message: some Sequence<UInt8>, key: [UInt8]) throws -> [UInt8] {
        guard key.count <= Int(Int32.max) else { throw CryptoError("HMAC-SHA-256: key too large") }
        var ok = false
        let mac = withContiguousBytes(key) { keyBytes, keyCount in
            withContiguousBytes(message) { input, count in
                makeBytes(count: byteCount) { out in
                    var length: UInt32 = 0
                    ok = HMAC(Algorithms.sha256, keyBytes, Int32(keyCount), input, count, out, &length) != nil
                        && Int(length) == byteCount
                    return ok ? byteCount : 0
                }
            }
        }
        guard ok else { throw CryptoError.openSSL("HMAC-SHA-256 failed") }
        return mac
    }

    /// Whether `mac` is the HMAC-SHA-256 of `message` under `key` (constant-time comparison).
    public static func isValid(_ mac: [UInt8], for message: some Sequence<UInt8>, key: [UInt8]) -> Bool {
        guard let expected = try? authenticationCode(for: message, key: key) else { return false }
        return constantTimeEquals(expected, mac)
    }
}
