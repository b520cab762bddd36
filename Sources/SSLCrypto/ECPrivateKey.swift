import COpenSSL

/// A private key on P-256, for ECDH (JWE `ECDH-ES`, RFC 7518 §4.6): an ephemeral key drawn per message on the
/// encrypting side, a device's key on the decrypting side. Immutable after creation and safe to share between
/// threads: every operation uses its own OpenSSL context.
public final class ECPrivateKey: @unchecked Sendable {
    /// The owned `EVP_PKEY*`; never mutated after init.
    let pkey: OpaquePointer

    /// Draws a new key (OpenSSL's DRBG). After the first, each key is generated from a context made from the first
    /// one (its key management and group taken from it), not looked up by name: an ephemeral key per message (Web Push,
    /// JWE `ECDH-ES`) costs the generation alone.
    public init() throws {
        ERR_clear_error()
        var generated: OpaquePointer? = nil
        if let template = Self.template {
            guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, template.pkey, nil) else {
                throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_pkey failed")
            }
            defer { EVP_PKEY_CTX_free(ctx) }
            guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_generate(ctx, &generated) == 1, let generated else {
                throw CryptoError.openSSL("P-256 key generation failed")
            }
            pkey = generated
            return
        }
        pkey = try Self.generateByName()
    }

    /// A key whose context makes the others (``init()``); nil if even it could not be made (every later
    /// generation then fails the same way, by name).
    private static let template: ECPrivateKey? = {
        guard let pkey = try? generateByName() else { return nil }
        return ECPrivateKey(retained: pkey)
    }()

    private init(retained pkey: OpaquePointer) { self.pkey = pkey }

    private static func generateByName() throws -> OpaquePointer {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_name(EC) failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        var generated: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(ctx) == 1,
              EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1,
              EVP_PKEY_generate(ctx, &generated) == 1,
              let generated
        else { throw CryptoError.openSSL("P-256 key generation failed") }
        return generated
    }

    /// The key of a JWK (`d`, `x`, `y`: 32 big-endian bytes each, RFC 7518 §6.2.2.1); refuses a `d` whose public
    /// point is not (`x`, `y`).
    public init(d: [UInt8], x: [UInt8], y: [UInt8]) throws {
        let size = ECPublicKey.scalarByteCount
        guard d.count == size, x.count == size, y.count == size else {
            throw CryptoError("P-256 private key: d, x and y must be 32 bytes each")
        }
        let loaded: OpaquePointer
        do {
            loaded = try KeyParameters.key(
                type: "EC", selection: KeyParameters.keyPairSelection,
                [("group", .utf8("P-256")), ("pub", .octets([0x04] + x + y)), ("priv", .unsigned(d))])
        } catch {
            ERR_clear_error()
            throw CryptoError("P-256 private key: not a valid key (the point (x, y) is not on the curve)")
        }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, loaded, nil) else {
            EVP_PKEY_free(loaded)
            throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_pkey failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        // The pair check: d in [1, n-1] and d·G = (x, y).
        guard EVP_PKEY_pairwise_check(ctx) == 1 else {
            ERR_clear_error()
            EVP_PKEY_free(loaded)
            throw CryptoError("P-256 private key: d does not match the public point (x, y)")
        }
        pkey = loaded
    }

    /// Loads a PEM private key (PKCS#8 `BEGIN PRIVATE KEY` or SEC 1 `BEGIN EC PRIVATE KEY`) on P-256; encrypted
    /// keys are refused.
    public init(pem: String) throws {
        ERR_clear_error()
        let loaded = try PEM.withReadBIO(pem) { bio in
            PEM_read_bio_PrivateKey(bio, nil, PEM.noPassphrase, nil)
        }
        guard let loaded else { throw CryptoError.openSSL("ECPrivateKey: cannot read PEM private key") }
        guard EVP_PKEY_is_a(loaded, "EC") == 1, Self.isP256(loaded) else {
            EVP_PKEY_free(loaded)
            ERR_clear_error()
            throw CryptoError("ECPrivateKey: not an EC key on P-256")
        }
        pkey = loaded
    }

    deinit { EVP_PKEY_free(pkey) }

    private static func isP256(_ pkey: OpaquePointer) -> Bool {
        var buffer = [CChar](repeating: 0, count: 80)
        var length = 0
        guard EVP_PKEY_get_group_name(pkey, &buffer, buffer.count, &length) == 1, length > 0, length < buffer.count else {
            return false
        }
        let name = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return ["prime256v1", "P-256", "secp256r1"].contains(name)
    }

    /// The matching public key (shares the same immutable OpenSSL key).
    public var publicKey: ECPublicKey {
        EVP_PKEY_up_ref(pkey)
        return ECPublicKey(retained: pkey)
    }

    /// The key as unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`).
    public func pemRepresentation() throws -> String {
        try PEM.writeToString("PEM_write_bio_PrivateKey failed") { bio in
            PEM_write_bio_PrivateKey(bio, pkey, nil, nil, 0, nil, nil)
        }
    }

    /// Signs `message` with ECDSA P-256 SHA-256 in the JWS form (JWS `ES256`, RFC 7518 §3.4): `r || s`, each a
    /// 32-byte big-endian integer, 64 bytes (VAPID, APNs provider tokens).
    public func signES256(_ message: some Sequence<UInt8>) throws -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError.openSSL("EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, Algorithms.sha256, nil, pkey) == 1 else {
            throw CryptoError.openSSL("ES256: EVP_DigestSignInit failed")
        }
        var length = 0
        let der: [UInt8]? = withContiguousBytes(message) { input, count in
            guard EVP_DigestSign(ctx, nil, &length, input, count) == 1, length > 0 else { return nil }
            var failed = false
            let bytes = makeBytes(count: length) { out in
                var written = length
                guard EVP_DigestSign(ctx, out, &written, input, count) == 1 else {
                    failed = true
                    return 0
                }
                return written
            }
            return failed ? nil : bytes
        }
        guard let der else { throw CryptoError.openSSL("ES256: signing failed") }
        return try Self.rawSignature(der: der)
    }

    /// Converts a DER `ECDSA-Sig-Value` into `r || s` (32 bytes each, left-padded).
    private static func rawSignature(der: [UInt8]) throws -> [UInt8] {
        let sig: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let sig else { throw CryptoError.openSSL("ES256: cannot read the signature") }
        defer { ECDSA_SIG_free(sig) }
        let half = ECPublicKey.scalarByteCount
        var failed = false
        let raw = makeBytes(count: 2 * half) { out in
            guard let r = ECDSA_SIG_get0_r(sig), let s = ECDSA_SIG_get0_s(sig),
                  BN_bn2binpad(r, out, Int32(half)) == Int32(half),
                  BN_bn2binpad(s, out + half, Int32(half)) == Int32(half)
            else {
                failed = true
                return 0
            }
            return 2 * half
        }
        if failed { throw CryptoError.openSSL("ES256: cannot encode the signature") }
        return raw
    }

    /// The ECDH shared secret `Z` with `peer` (the x coordinate of d·Q, 32 bytes; SP 800-56A §5.7.1.2).
    ///
    /// `peer` was checked when it was made (on the curve, not the point at infinity; the cofactor of P-256 is 1,
    /// so that is the full check), so it is not checked again here.
    public func sharedSecret(with peer: ECPublicKey) throws -> [UInt8] {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else {
            throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_pkey failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        var failed = false
        let secret = makeBytes(count: ECPublicKey.scalarByteCount) { out in
            var length = ECPublicKey.scalarByteCount
            guard EVP_PKEY_derive_init(ctx) == 1,
                  EVP_PKEY_derive_set_peer_ex(ctx, peer.pkey, 0) == 1,
                  EVP_PKEY_derive(ctx, out, &length) == 1,
                  length == ECPublicKey.scalarByteCount
            else {
                failed = true
                return 0
            }
            return length
        }
        if failed { throw CryptoError.openSSL("ECDH failed") }
        return secret
    }
}
