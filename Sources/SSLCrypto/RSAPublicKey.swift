import COpenSSL

/// An RSA public key (at least 2048 bits). Immutable after creation and safe to share between threads.
public final class RSAPublicKey: @unchecked Sendable {
    /// The owned `EVP_PKEY*`; never mutated after init.
    let pkey: OpaquePointer

    /// Loads a PEM public key: SubjectPublicKeyInfo (`BEGIN PUBLIC KEY`) or PKCS#1 (`BEGIN RSA PUBLIC KEY`).
    public init(pem: String) throws {
        ERR_clear_error()
        var loaded: OpaquePointer? = nil
        guard let decoder = OSSL_DECODER_CTX_new_for_pkey(
            &loaded, "PEM", nil, "RSA", Int32(OSSL_KEYMGMT_SELECT_PUBLIC_KEY), nil, nil)
        else { throw CryptoError.openSSL("OSSL_DECODER_CTX_new_for_pkey failed") }
        defer { OSSL_DECODER_CTX_free(decoder) }
        var utf8 = Array(pem.utf8)
        let decoded = utf8.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var data = UnsafePointer(buffer.baseAddress)
            var length = buffer.count
            return OSSL_DECODER_from_data(decoder, &data, &length)
        }
        guard decoded == 1, let loaded else {
            throw CryptoError.openSSL("RSAPublicKey: cannot read PEM public key")
        }
        try requireRSA(loaded, "RSAPublicKey")
        pkey = loaded
    }

    /// The key of a JWK's `n` and `e` (RFC 7518 §6.3.1: unsigned big-endian integers): at least 2048 bits, an odd
    /// exponent from 3 to 2^32 - 1 (what RSA keys use in practice; 65537 almost always).
    public init(modulus: [UInt8], exponent: [UInt8]) throws {
        let significantModulus = modulus.drop { $0 == 0 }
        guard significantModulus.count >= 256, significantModulus.count <= 2048 else {
            throw CryptoError("RSA public key: the modulus n must be 2048 to 16384 bits, not \(significantModulus.count * 8)")
        }
        let significantExponent = exponent.drop { $0 == 0 }
        guard !significantExponent.isEmpty, significantExponent.count <= 4,
              let last = significantExponent.last, last & 1 == 1,
              significantExponent.count > 1 || last >= 3
        else { throw CryptoError("RSA public key: the exponent e must be odd, from 3 to 2^32 - 1") }
        let loaded: OpaquePointer
        do {
            loaded = try KeyParameters.key(
                type: "RSA", selection: KeyParameters.publicKeySelection,
                [("n", .unsigned(Array(significantModulus))), ("e", .unsigned(Array(significantExponent)))])
        } catch {
            throw CryptoError("RSA public key: not a valid key (\(error))")
        }
        try requireRSA(loaded, "RSAPublicKey")
        pkey = loaded
    }

    /// Takes ownership of one reference to `pkey`.
    init(retained pkey: OpaquePointer) {
        self.pkey = pkey
    }

    deinit { EVP_PKEY_free(pkey) }

    /// Size of the modulus in bytes (= signature and RSA-OAEP ciphertext length).
    public var modulusByteCount: Int { Int(EVP_PKEY_get_size(pkey)) }

    /// The key as SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`).
    public func pemRepresentation() throws -> String {
        try PEM.writeToString("PEM_write_bio_PUBKEY failed") { bio in PEM_write_bio_PUBKEY(bio, pkey) }
    }

    /// Verifies an RSASSA-PKCS1-v1_5 SHA-256 signature (JWS `RS256`). Any failure is `false`.
    public func verifyRS256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == modulusByteCount, let ctx = EVP_MD_CTX_new() else { return false }
        defer {
            EVP_MD_CTX_free(ctx)
            ERR_clear_error()
        }
        guard EVP_DigestVerifyInit(ctx, nil, Algorithms.sha256, nil, pkey) == 1 else { return false }
        return signature.withUnsafeBufferPointer { sig in
            withContiguousBytes(message) { input, count in
                EVP_DigestVerify(ctx, sig.baseAddress, sig.count, input, count) == 1
            }
        }
    }

    /// Encrypts `plaintext` with RSAES-OAEP, SHA-256 and MGF1-SHA-256 (JWE `RSA-OAEP-256`, RFC 7518 §4.3).
    public func encryptOAEPSHA256(_ plaintext: [UInt8]) throws -> [UInt8] {
        let ctx = try makeOAEPContext(pkey, forEncryption: true)
        defer { EVP_PKEY_CTX_free(ctx) }
        var failed = false
        let ciphertext = withContiguousBytes(plaintext) { input, count in
            makeBytes(count: modulusByteCount) { out in
                var length = modulusByteCount
                guard EVP_PKEY_encrypt(ctx, out, &length, input, count) == 1 else {
                    failed = true
                    return 0
                }
                return length
            }
        }
        if failed { throw CryptoError.openSSL("RSA-OAEP encryption failed") }
        return ciphertext
    }
}
