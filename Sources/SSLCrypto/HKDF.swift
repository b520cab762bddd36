/// HKDF with SHA-256 (RFC 5869): extract-then-expand, over ``HMACSHA256``.
public enum HKDF {
    /// `HKDF-Extract(salt, ikm)`: the 32-byte pseudorandom key.
    public static func extract(salt: [UInt8], inputKeyingMaterial ikm: [UInt8]) throws -> [UInt8] {
        try HMACSHA256.authenticationCode(for: ikm, key: salt)
    }

    /// `HKDF-Expand(prk, info, length)`; `length` at most 255 × 32 bytes.
    public static func expand(pseudorandomKey prk: [UInt8], info: [UInt8], length: Int) throws -> [UInt8] {
        guard length >= 0, length <= 255 * HMACSHA256.byteCount else {
            throw CryptoError("HKDF: length must be within 0...\(255 * HMACSHA256.byteCount)")
        }
        var output: [UInt8] = []
        output.reserveCapacity(length + HMACSHA256.byteCount)
        var block: [UInt8] = []
        var counter: UInt8 = 1
        while output.count < length {
            block = try HMACSHA256.authenticationCode(for: block + info + [counter], key: prk)
            output += block
            counter &+= 1
        }
        return Array(output.prefix(length))
    }

    /// Extract, then expand.
    public static func sha256(salt: [UInt8], inputKeyingMaterial ikm: [UInt8], info: [UInt8], length: Int) throws -> [UInt8] {
        try expand(pseudorandomKey: extract(salt: salt, inputKeyingMaterial: ikm), info: info, length: length)
    }
}
