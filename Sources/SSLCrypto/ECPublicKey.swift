import COpenSSL

/// A public key on P-256 (secp256r1 / prime256v1): the only curve of JWS `ES256` (RFC 7518 §3.4) and of the
/// device keys of JWE `ECDH-ES+A256KW` (RFC 7518 §4.6). Immutable after creation and safe to share between threads.
public final class ECPublicKey: @unchecked Sendable {
    /// Byte length of one P-256 coordinate / scalar; a JWS ES256 signature is `r || s`, twice this.
    static let scalarByteCount = 32

    /// The owned `EVP_PKEY*`; never mutated after init.
    let pkey: OpaquePointer

    /// Loads a SubjectPublicKeyInfo PEM public key (`BEGIN PUBLIC KEY`). Refuses anything but an EC key
    /// on the named curve P-256 (other curves, explicit curve parameters, RSA keys, ...).
    public init(pem: String) throws {
        ERR_clear_error()
        var loaded: OpaquePointer? = nil
        // No key type: the decoder accepts any public key, so a wrong key type is reported as such below.
        guard let decoder = OSSL_DECODER_CTX_new_for_pkey(
            &loaded, "PEM", "SubjectPublicKeyInfo", nil, Int32(OSSL_KEYMGMT_SELECT_PUBLIC_KEY), nil, nil)
        else { throw CryptoError.openSSL("OSSL_DECODER_CTX_new_for_pkey failed") }
        defer { OSSL_DECODER_CTX_free(decoder) }
        var utf8 = Array(pem.utf8)
        let decoded = utf8.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var data = UnsafePointer(buffer.baseAddress)
            var length = buffer.count
            return OSSL_DECODER_from_data(decoder, &data, &length)
        }
        guard decoded == 1, let loaded else {
            throw CryptoError.openSSL("ECPublicKey: cannot read PEM public key (SubjectPublicKeyInfo expected)")
        }
        ERR_clear_error()
        guard EVP_PKEY_is_a(loaded, "EC") == 1 else {
            EVP_PKEY_free(loaded)
            throw CryptoError("ECPublicKey: not an EC key (an ECDSA P-256 public key is required)")
        }
        let curve = Self.groupName(loaded)
        guard let curve, ["prime256v1", "P-256", "secp256r1"].contains(curve) else {
            EVP_PKEY_free(loaded)
            ERR_clear_error()
            throw CryptoError("ECPublicKey: unsupported curve \(curve ?? "(explicit parameters)"); only P-256 is supported")
        }
        pkey = loaded
    }

    /// The point (`x`, `y`), each coordinate exactly 32 big-endian bytes (a JWK's `x` and `y`, RFC 7518 §6.2.1):
    /// refuses any other size and a point that is not on the curve.
    public init(x: [UInt8], y: [UInt8]) throws {
        guard x.count == Self.scalarByteCount, y.count == Self.scalarByteCount else {
            throw CryptoError("P-256 public key: x and y must be 32 bytes each, not \(x.count) and \(y.count)")
        }
        let loaded: OpaquePointer
        do {
            loaded = try KeyParameters.key(
                type: "EC", selection: KeyParameters.publicKeySelection,
                [("group", .utf8("P-256")), ("pub", .octets([0x04] + x + y))])
        } catch {
            ERR_clear_error()
            throw CryptoError("P-256 public key: the point (x, y) is not on the curve")
        }
        // EVP_PKEY_fromdata already refuses a point off the curve; the quick check also refuses the point at infinity.
        guard Self.quickCheck(loaded) else {
            EVP_PKEY_free(loaded)
            throw CryptoError("P-256 public key: the point (x, y) is not a valid public key")
        }
        pkey = loaded
    }

    /// Takes ownership of one reference to `pkey` (a P-256 key).
    init(retained pkey: OpaquePointer) {
        self.pkey = pkey
    }

    deinit { EVP_PKEY_free(pkey) }

    /// `EVP_PKEY_public_check_quick`: on the curve, not the point at infinity.
    static func quickCheck(_ pkey: OpaquePointer) -> Bool {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { return false }
        defer {
            EVP_PKEY_CTX_free(ctx)
            ERR_clear_error()
        }
        return EVP_PKEY_public_check_quick(ctx) == 1
    }

    /// The key of an uncompressed point (`0x04 || x || y`, 65 bytes: SEC 1 §2.3.3, X9.63), as a browser gives its
    /// Web Push key (`p256dh`) and a VAPID key is published.
    public convenience init(uncompressedPoint point: [UInt8]) throws {
        let size = Self.scalarByteCount
        guard point.count == 1 + 2 * size, point[0] == 0x04 else {
            throw CryptoError("P-256 public key: an uncompressed point is 65 bytes starting with 0x04")
        }
        try self.init(x: Array(point[1...size]), y: Array(point[(1 + size)...]))
    }

    /// The uncompressed point `0x04 || x || y` (65 bytes).
    public var uncompressedPoint: [UInt8] {
        get throws {
            guard let point = KeyParameters.octets(pkey, "pub", capacity: 1 + 2 * Self.scalarByteCount),
                  point.count == 1 + 2 * Self.scalarByteCount, point[0] == 0x04
            else { throw CryptoError("P-256 public key: cannot read its point") }
            return point
        }
    }

    /// The coordinates `x` and `y`, 32 big-endian bytes each.
    public var coordinates: (x: [UInt8], y: [UInt8]) {
        get throws {
            let point = try uncompressedPoint
            return (Array(point[1...Self.scalarByteCount]), Array(point[(1 + Self.scalarByteCount)...]))
        }
    }

    /// The named curve of an EC key (OpenSSL's short name, e.g. `prime256v1`), nil when it has none.
    private static func groupName(_ pkey: OpaquePointer) -> String? {
        var buffer = [CChar](repeating: 0, count: 80)
        var length = 0
        guard EVP_PKEY_get_group_name(pkey, &buffer, buffer.count, &length) == 1,
              length > 0, length < buffer.count
        else { return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The key as SubjectPublicKeyInfo PEM (`BEGIN PUBLIC KEY`).
    public func pemRepresentation() throws -> String {
        try PEM.writeToString("PEM_write_bio_PUBKEY failed") { bio in PEM_write_bio_PUBKEY(bio, pkey) }
    }

    /// Verifies an ECDSA P-256 SHA-256 signature in the JWS form (JWS `ES256`, RFC 7518 §3.4): `r || s`,
    /// each a 32-byte big-endian integer, exactly 64 bytes. Any failure (including a DER signature) is `false`.
    public func verifyES256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard signature.count == 2 * Self.scalarByteCount,
              let der = Self.derSignature(rawRS: signature),
              let ctx = EVP_MD_CTX_new()
        else {
            ERR_clear_error()
            return false
        }
        defer {
            EVP_MD_CTX_free(ctx)
            ERR_clear_error()
        }
        guard EVP_DigestVerifyInit(ctx, nil, Algorithms.sha256, nil, pkey) == 1 else { return false }
        return der.withUnsafeBufferPointer { sig in
            withContiguousBytes(message) { input, count in
                EVP_DigestVerify(ctx, sig.baseAddress, sig.count, input, count) == 1
            }
        }
    }

    /// Converts a 64-byte `r || s` into the DER `ECDSA-Sig-Value` OpenSSL verifies; nil on failure.
    private static func derSignature(rawRS: [UInt8]) -> [UInt8]? {
        guard let sig = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(sig) }
        let half = scalarByteCount
        let (r, s) = rawRS.withUnsafeBufferPointer { raw -> (OpaquePointer?, OpaquePointer?) in
            guard let base = raw.baseAddress else { return (nil, nil) }
            return (BN_bin2bn(base, Int32(half), nil), BN_bin2bn(base + half, Int32(half), nil))
        }
        guard let r, let s else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        // On success `sig` owns both numbers (freed with it); on failure they are still ours.
        guard ECDSA_SIG_set0(sig, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(sig, nil)
        guard length > 0 else { return nil }
        var failed = false
        let der = makeBytes(count: Int(length)) { out in
            var cursor: UnsafeMutablePointer<UInt8>? = out  // i2d advances the cursor past what it wrote
            let written = i2d_ECDSA_SIG(sig, &cursor)
            guard written == length else {
                failed = true
                return 0
            }
            return Int(written)
        }
        return failed ? nil : der
    }
}
