import COpenSSL

/// AES-256 in Galois/Counter Mode (NIST SP 800-38D) with a 96-bit IV and a 128-bit tag (JWE `A256GCM`).
public enum AES256GCM {
    public static let keyByteCount = 32
    public static let ivByteCount = 12
    public static let tagByteCount = 16
    private static let mode = AESGCM(cipher: Algorithms.aes256GCM, name: "AES-256-GCM", keyByteCount: keyByteCount)

    /// Encrypts `plaintext` and authenticates it together with `aad`.
    /// The caller must never reuse an IV with the same key.
    public static func seal(
        _ plaintext: some Sequence<UInt8>, key: [UInt8], iv: [UInt8], aad: some Sequence<UInt8>
    ) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        try mode.seal(plaintext, key: key, iv: iv, aad: aad)
    }

    /// Decrypts `ciphertext` after checking `tag` over it and `aad`; throws if authentication fails
    /// (no plaintext is ever returned for an unauthenticated input).
    public static func open(
        _ ciphertext: [UInt8], tag: [UInt8], key: [UInt8], iv: [UInt8], aad: some Sequence<UInt8>
    ) throws -> [UInt8] {
        try mode.open(ciphertext, tag: tag, key: key, iv: iv, aad: aad)
    }
}

/// AES-128 in Galois/Counter Mode with a 96-bit IV and a 128-bit tag (the `aes128gcm` content coding of
/// RFC 8188, Web Push message encryption).
public enum AES128GCM {
    public static let keyByteCount = 16
    public static let ivByteCount = 12
    public static let tagByteCount = 16
    private static let mode = AESGCM(cipher: Algorithms.aes128GCM, name: "AES-128-GCM", keyByteCount: keyByteCount)

    /// Encrypts `plaintext` and authenticates it together with `aad`.
    /// The caller must never reuse an IV with the same key.
    public static func seal(
        _ plaintext: some Sequence<UInt8>, key: [UInt8], iv: [UInt8], aad: some Sequence<UInt8> = EmptyCollection()
    ) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        try mode.seal(plaintext, key: key, iv: iv, aad: aad)
    }

    /// Decrypts `ciphertext` after checking `tag` over it and `aad`; throws if authentication fails.
    public static func open(
        _ ciphertext: [UInt8], tag: [UInt8], key: [UInt8], iv: [UInt8], aad: some Sequence<UInt8> = EmptyCollection()
    ) throws -> [UInt8] {
        try mode.open(ciphertext, tag: tag, key: key, iv: iv, aad: aad)
    }
}

/// GCM over one AES key size: what ``AES256GCM`` and ``AES128GCM`` share.
struct AESGCM: @unchecked Sendable {
    /// The fetched `EVP_CIPHER` (immutable, shared).
    let cipher: OpaquePointer
    let name: String
    let keyByteCount: Int
    static let ivByteCount = 12
    static let tagByteCount = 16

    func seal(
        _ plaintext: some Sequence<UInt8>, key: [UInt8], iv: [UInt8], aad: some Sequence<UInt8>
    ) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        try checkSizes(key: key, iv: iv)
        let ctx = try CipherContext()
        var tag = [UInt8](repeating: 0, count: Self.tagByteCount)
        var failure: CryptoError? = nil
        let (cipher, name) = (self.cipher, self.name)
        let ciphertext = withContiguousBytes(plaintext) { input, count in
            makeBytes(count: count) { out in
                guard count <= Int(Int32.max) else {
                    failure = CryptoError("\(name): input too large")
                    return 0
                }
                var written: Int32 = 0, finalWritten: Int32 = 0
                guard EVP_EncryptInit_ex2(ctx.pointer, cipher, key, iv, nil) == 1,
                      Self.updateAAD(ctx.pointer, aad, encrypting: true),
                      EVP_EncryptUpdate(ctx.pointer, out, &written, input, Int32(count)) == 1,
                      EVP_EncryptFinal_ex(ctx.pointer, out + Int(written), &finalWritten) == 1,
                      EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_GCM_GET_TAG, Int32(Self.tagByteCount), &tag) == 1
                else {
                    failure = CryptoError.openSSL("\(name) encryption failed")
                    return 0
                }
                return Int(written + finalWritten)
            }
        }
        if let failure { throw failure }
        return (ciphertext, tag)
    }

    func open(
        _ ciphertext: [UInt8], tag: [UInt8], key: [UInt8], iv: [UInt8], aad: some Sequence<UInt8>
    ) throws -> [UInt8] {
        try checkSizes(key: key, iv: iv)
        guard tag.count == Self.tagByteCount else { throw CryptoError("\(name): tag must be 16 bytes") }
        guard ciphertext.count <= Int(Int32.max) else { throw CryptoError("\(name): input too large") }
        let ctx = try CipherContext()
        var tagCopy = tag  // EVP_CIPHER_CTX_ctrl takes a mutable pointer.
        var authenticated = false
        let cipher = self.cipher
        let plaintext = withContiguousBytes(ciphertext) { input, count in
            makeBytes(count: count) { out in
                var written: Int32 = 0, finalWritten: Int32 = 0
                guard EVP_DecryptInit_ex2(ctx.pointer, cipher, key, iv, nil) == 1,
                      Self.updateAAD(ctx.pointer, aad, encrypting: false),
                      EVP_DecryptUpdate(ctx.pointer, out, &written, input, Int32(count)) == 1,
                      EVP_CIPHER_CTX_ctrl(ctx.pointer, EVP_CTRL_GCM_SET_TAG, Int32(Self.tagByteCount), &tagCopy) == 1,
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
            throw CryptoError("\(name): authentication failed")
        }
        return plaintext
    }

    private func checkSizes(key: [UInt8], iv: [UInt8]) throws {
        guard key.count == keyByteCount else { throw CryptoError("\(name): key must be \(keyByteCount) bytes") }
        guard iv.count == Self.ivByteCount else { throw CryptoError("\(name): IV must be 12 bytes") }
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
