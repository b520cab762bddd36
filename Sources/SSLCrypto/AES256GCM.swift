import COpenSSL

/// AES-256 in Galois/Counter Mode (NIST SP 800-38D) with a 96-bit IV and a 128-bit tag (JWE `A256GCM`).
public enum AES256GCM {
    public static let keyByteCount = 32
    public static let ivByteCount = 12
    public static let tagByteCount = 16

    /// Encrypts `plaintext` and authenticates it together with `aad`.
    /// The caller must never reuse an IV with the same key.
    public static func seal(
        _ plaintext: some Sequence<UInt8>, key: [UInt8], iv: [UInt8], aad: some Sequence<UInt8>
    ) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        try checkSizes(key: key, iv: iv)
        let ctx = try CipherContext()
        var tag = [UInt8](repeating: 0, count: tagByteCount)
        var failure: CryptoError? = nil
        let ciphertext = withContiguousBytes(plaintext) { input, count in
            makeBytes(count: count) { out in
                guard count <= Int(Int32.max) else {
                    failure = CryptoError("AES-256-GCM: input too large")
                    return 0
                }
                var written: Int32 = 0, finalWritten: Int32 = 0
                guard EVP_EncryptInit_ex2(ctx.pointer, Algorithms.aes256GCM, key, iv, nil) == 1,
                      updateAAD(ctx.pointer, aad, encrypting: true),
                      EVP_EncryptUpdate(ctx.pointer, out, &written, input, Int32(count)) == 1,
                      EVP_EncryptFinal_ex(ctx.pointer, out + Int(written), &finalWritten) == 1,
                      EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), &tag) == 1
                else {
                    failure = CryptoError.openSSL("AES-256-GCM encryption failed")
                    return 0
                }
                return Int(written + finalWritten)
            }
        }
        if let failure { throw failure }
        return (ciphertext, tag)
    }

    /// Decrypts `ciphertext` after checking `tag` over it and `aad`; throws if authentication fails
    /// (no plaintext is ever returned for an unauthenticated input).
    public static func open(
        _ ciphertext: [UInt8], tag: [UInt8], key: [UInt8], iv: [UInt8], aad: some Sequence<UInt8>
    ) throws -> [UInt8] {
        try checkSizes(key: key, iv: iv)
        guard tag.count == tagByteCount else { throw CryptoError("AES-256-GCM: tag must be 16 bytes") }
        guard ciphertext.count <= Int(Int32.max) else { throw CryptoError("AES-256-GCM: input too large") }
        let ctx = try CipherContext()
        var tagCopy = tag  // EVP_CIPHER_CTX_ctrl takes a mutable pointer.
        var authenticated = false
        let plaintext = withContiguousBytes(ciphertext) { input, count in
            makeBytes(count: count) { out in
                var written: Int32 = 0, finalWritten: Int32 = 0
                guard EVP_DecryptInit_ex2(ctx.pointer, Algorithms.aes256GCM, key, iv, nil) == 1,
                      updateAAD(ctx.pointer, aad, encrypting: false),
                      EVP_DecryptUpdate(ctx.pointer, out, &written, input, Int32(count)) == 1,
                      EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), &tagCopy) == 1,
                      EVP_DecryptFinal_ex(ctx.pointer, out + Int(written), &finalWritten) == 1
                else {
                    // Wipe whatever was decrypted before the tag check failed.
                    out.update(repeating: 0, count: count)
                    return 0
                }
                authenticated = true
                return Int(written + finalWritten)
            }
        }
        guard authenticated else {
            ERR_clear_error()
            throw CryptoError("AES-256-GCM: authentication failed")
        }
        return plaintext
    }

    private static func checkSizes(key: [UInt8], iv: [UInt8]) throws {
        guard key.count == keyByteCount else { throw CryptoError("AES-256-GCM: key must be 32 bytes") }
        guard iv.count == ivByteCount else { throw CryptoError("AES-256-GCM: IV must be 12 bytes") }
    }

    private static func updateAAD(_ ctx: OpaquePointer, _ aad: some Sequence<UInt8>, encrypting: Bool) -> Bool {
        withContiguousBytes(aad) { bytes, count in
            if count == 0 { return true }
            guard count <= Int(Int32.max) else { return false }
            var ignored: Int32 = 0
            return encrypting
                ? EVP_EncryptUpdate(ctx, nil, &ignored, bytes, Int32(count)) == 1
                : EVP_DecryptUpdate(ctx, nil, &ignored, bytes, Int32(count)) == 1
        }
    }
}

/// Owns one `EVP_CIPHER_CTX*` for the duration of a single operation.
final class CipherContext {
    let pointer: OpaquePointer

    init() throws {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL("EVP_CIPHER_CTX_new failed") }
        pointer = ctx
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }
}
