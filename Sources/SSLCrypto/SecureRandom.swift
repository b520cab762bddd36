import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's DRBG (`RAND_bytes`).
public enum SecureRandom {
    /// Returns `count` random bytes.
    public static func bytes(_ count: Int) throws -> [UInt8] {
        guard count >= 0, count <= Int(Int32.max) else {
            throw CryptoError("SecureRandom: invalid byte count \(count)")
        }
        var failed = false
        let result = makeBytes(count: count) { buffer in
            if count > 0 && RAND_bytes(buffer, Int32(count)) != 1 { failed = true }
            return count
        }
        if failed { throw CryptoError.openSSL("RAND_bytes failed") }
        return result
    }
}
