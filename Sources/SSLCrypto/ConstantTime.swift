import COpenSSL

/// Compares two byte arrays in time independent of their contents (`CRYPTO_memcmp`).
/// Arrays of different lengths compare unequal (the length itself is not treated as secret).
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return a.withUnsafeBytes { lhs in
        b.withUnsafeBytes { rhs in
            CRYPTO_memcmp(lhs.baseAddress, rhs.baseAddress, lhs.count) == 0
        }
    }
}
