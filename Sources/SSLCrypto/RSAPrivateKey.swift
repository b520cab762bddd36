import COpenSSL

/// An RSA private key (at least 2048 bits). Immutable after creation and safe to share between threads:
/// every operation uses its own OpenSSL context.
public final class RSAPrivateKey: @unchecked Sendable {
    /// The owned `EVP_PKEY*`; never mutated after init.
    let pkey: OpaquePointer

    /// Loads a PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`) or PKCS#1 (`BEGIN RSA PRIVATE KEY`).
    /// Encrypted keys are rejected (no passphrase is ever asked for).
    public init(pem: String) throws {
        ERR_clear_error()
        let loaded = try PEM.withReadBIO(pem) { bio in
            PEM_read_bio_PrivateKey(bio, nil, PEM.noPassphrase, nil)
        }
        guard let loaded else { throw CryptoError.openSSL("RSAPrivateKey: cannot read PEM private key") }
        try requireRSA(loaded, "RSAPrivateKey")
        pkey = loaded
    }

    /// Generates a new key of `bits` bits (2048 or more) with public exponent 65537.
    public init(generatingBits bits: Int = 2048) throws {
        guard bits >= 2048, bits <= 16384 else { throw CryptoError("RSAPrivateKey: unsupported size \(bits)") }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else {
            throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_name(RSA) failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        var generated: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(ctx) == 1,
              EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)) == 1,
              EVP_PKEY_generate(ctx, &generated) == 1,
              let generated
        else { throw CryptoError.openSSL("RSA key generation failed") }
        pkey = generated
    }

    deinit { EVP_PKEY_free(pkey) }

    /// The matching public key (shares the same immutable OpenSSL key).
    public var publicKey: RSAPublicKey {
        EVP_PKEY_up_ref(pkey)
        return RSAPublicKey(retained: pkey)
    }

    /// Size of the modulus in bytes (= signature and RSA-OAEP ciphertext length).
    public var modulusByteCount: Int { Int(EVP_PKEY_get_size(pkey)) }

    /// The key as unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`).
    public func pemRepresentation() throws -> String {
        try PEM.writeToString("PEM_write_bio_PrivateKey failed") { bio in
            PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil)
        }
    }

    /// Signs `message` with RSASSA-PKCS1-v1_5 over SHA-256 (JWS `RS256`, RFC 7518 §3.3).
    public func signRS256(_ message: some Sequence<UInt8>) throws -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError.openSSL("EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, Algorithms.sha256, nil, pkey) == 1 else {
            throw CryptoError.openSSL("EVP_DigestSignInit failed")
        }
        var failed = false
        let signature = withContiguousBytes(message) { input, count in
            makeBytes(count: modulusByteCount) { out in
                var length = modulusByteCount
                guard EVP_DigestSign(ctx, out, &length, input, count) == 1 else {
                    failed = true
                    return 0
                }
                return length
            }
        }
        if failed { throw CryptoError.openSSL("EVP_DigestSign failed") }
        return signature
    }

    /// Decrypts an RSAES-OAEP ciphertext made with SHA-256 and MGF1-SHA-256 (JWE `RSA-OAEP-256`).
    public func decryptOAEPSHA256(_ ciphertext: [UInt8]) throws -> [UInt8] {
        let ctx = try makeOAEPContext(pkey, forEncryption: false)
        defer { EVP_PKEY_CTX_free(ctx) }
        var failed = false
        let plaintext = ciphertext.withUnsafeBufferPointer { input in
            makeBytes(count: modulusByteCount) { out in
                var length = modulusByteCount
                guard EVP_PKEY_decrypt(ctx, out, &length, input.baseAddress, input.count) == 1 else {
                    failed = true
                    return 0
                }
                return length
            }
        }
        if failed {
            // Do not report OpenSSL's reason: a detailed padding error is an oracle (RFC 7516 §11.5).
            ERR_clear_error()
            throw CryptoError("RSA-OAEP decryption failed")
        }
        return plaintext
    }
}

/// A `EVP_PKEY_CTX` set up for RSA-OAEP with SHA-256 and MGF1-SHA-256; the caller frees it.
func makeOAEPContext(_ pkey: OpaquePointer, forEncryption: Bool) throws -> OpaquePointer {
    guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
        throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_pkey failed")
    }
    let initialised = forEncryption ? EVP_PKEY_encrypt_init(ctx) : EVP_PKEY_decrypt_init(ctx)
    guard initialised == 1,
          EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) == 1,
          EVP_PKEY_CTX_set_rsa_oaep_md(ctx, Algorithms.sha256) == 1,
          EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, Algorithms.sha256) == 1
    else {
        EVP_PKEY_CTX_free(ctx)
        throw CryptoError.openSSL("RSA-OAEP context setup failed")
    }
    return ctx
}
