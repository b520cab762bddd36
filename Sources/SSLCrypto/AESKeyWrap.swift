import COpenSSL

/// AES Key Wrap (RFC 3394) with a 256-bit key-encryption key and the default IV (JWE `A256KW`).
public enum AESKeyWrap {
    public static let kekByteCount = 32
    /// A wrapped 32-byte (AES-256) content-encryption key: 40 bytes.
    public static let wrappedCEKByteCount = 40

    /// Wraps `keyData` (a multiple of 8 bytes, at least 16); the result is 8 bytes longer.
    public static func wrap(_ keyData: [UInt8], kek: [UInt8]) throws -> [UInt8] {
        guard keyData.count >= 16, keyData.count % 8 == 0, keyData.count <= 4096 else {
            throw CryptoError("AES key wrap: key data must be a multiple of 8 bytes, at least 16")
        }
        return try run(keyData, kek: kek, outputCount: keyData.count + 8, encrypting: true)
    }

    /// Unwraps `wrapped` (a multiple of 8 bytes, at least 24); throws if the integrity check fails.
    public static func unwrap(_ wrapped: [UInt8], kek: [UInt8]) throws -> [UInt8] {
        guard wrapped.count >= 24, wrapped.count % 8 == 0, wrapped.count <= 4104 else {
            throw CryptoError("AES key unwrap: wrapped key must be a multiple of 8 bytes, at least 24")
        }
        return try run(wrapped, kek: kek, outputCount: wrapped.count - 8, encrypting: false)
    }

    private static func run(_ input: [UInt8], kek: [UInt8], outputCount: Int, encrypting: Bool) throws -> [UInt8] {
        guard kek.count == kekByteCount else { throw CryptoError("AES key wrap: KEK must be 32 bytes") }
        let ctx = try CipherContext()
        // Wrap modes are refused by the EVP layer unless explicitly allowed.
        EVP_CIPHER_CTX_set_flags(ctx.pointer, Int32(EVP_CIPHER_CTX_FLAG_WRAP_ALLOW))
        var ok = false
        let output = input.withUnsafeBufferPointer { bytes in
            // Wrap ciphers may write up to one block more than the result while working.
            makeBytes(count: outputCount + 16) { out in
                var written: Int32 = 0, finalWritten: Int32 = 0
                let done = encrypting
                    ? EVP_EncryptInit_ex2(ctx.pointer, Algorithms.aes256Wrap, kek, nil, nil) == 1
                        && EVP_EncryptUpdate(ctx.pointer, out, &written, bytes.baseAddress, Int32(bytes.count)) == 1
                        && EVP_EncryptFinal_ex(ctx.pointer, out + Int(written), &finalWritten) == 1
                    : EVP_DecryptInit_ex2(ctx.pointer, Algorithms.aes256Wrap, kek, nil, nil) == 1
                        && EVP_DecryptUpdate(ctx.pointer, out, &written, bytes.baseAddress, Int32(bytes.count)) == 1
                        && EVP_DecryptFinal_ex(ctx.pointer, out + Int(written), &finalWritten) == 1
                guard done, Int(written + finalWritten) == outputCount else {
                    out.update(repeating: 0, count: outputCount + 16)
                    return 0
                }
                ok = true
                return outputCount
            }
        }
        guard ok else {
            if encrypting { throw CryptoError.openSSL("AES key wrap failed") }
            ERR_clear_error()
            throw CryptoError("AES key unwrap: integrity check failed")
        }
        return output
    }
}
