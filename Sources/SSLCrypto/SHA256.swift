import COpenSSL

/// SHA-256 (FIPS 180-4).
public enum SHA256 {
    /// Length of a SHA-256 digest in bytes.
    public static let byteCount = 32

    /// Returns the 32-byte SHA-256 digest of `data`.
    public static func hash(_ data: some Sequence<UInt8>) -> [UInt8] {
        withContiguousBytes(data) { input, count in
            makeBytes(count: byteCount) { out in
                var length: UInt32 = 0
                // EVP_Digest with a fetched SHA-256 over memory cannot fail short of memory exhaustion.
                guard EVP_Digest(input, count, out, &length, Algorithms.sha256, nil) == 1 else {
                    fatalError("\(CryptoError.openSSL("EVP_Digest(SHA-256) failed"))")
                }
                return Int(length)
            }
        }
    }
}
