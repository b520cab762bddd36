import SSLCrypto

/// A key for JWE encryption and/or decryption with `enc` = `A256GCM`, with its key identifier.
///
/// Immutable and `Sendable`: build it once (e.g. when settings load) and share it between threads.
/// The protected header this key produces is computed once, here, not per message.
public struct JWEKey: Sendable {
    enum Material: Sendable {
        /// A 32-byte key: the CEK itself for `dir`, the KEK for `A256KW`.
        case symmetric([UInt8])
        case rsaPublic(RSAPublicKey)
        case rsaPrivate(RSAPrivateKey, RSAPublicKey)
        /// A P-256 key to agree with (`ECDH-ES+A256KW`): the recipient's public key, or its private key to decrypt.
        case ecPublic(ECPublicKey)
        case ecPrivate(ECPrivateKey)
    }

    /// The key identifier, written as `kid` in the protected header; empty: none (a device key given without
    /// one: the header then has no `kid`). Keys read from settings or key files always have one.
    public let kid: String
    /// The key-management algorithm, written as `alg`.
    public let algorithm: JWEAlgorithm
    let material: Material
    /// ASCII of base64url(`{"alg":"…","enc":"A256GCM","kid":"…"}`): first part of the compact form and the GCM AAD.
    /// For `ECDH-ES+A256KW` the header also holds the message's ephemeral key, so it is built per message and this
    /// is empty.
    let encodedHeader: [UInt8]

    private init(kid: String, algorithm: JWEAlgorithm, material: Material) {
        self.kid = kid
        self.algorithm = algorithm
        self.material = material
        encodedHeader = algorithm == .ecdhESA256KW ? [] : ProtectedHeader.encoded(algorithm: algorithm, kid: kid, epk: nil)
    }

    /// The `kid` written in the header: nil when the key has none.
    public var headerKid: String? { kid.isEmpty ? nil : kid }

    /// The P-256 private key this key holds (a device's decrypting key), nil for any other.
    public var ecPrivateKey: ECPrivateKey? {
        if case .ecPrivate(let key) = material { return key }
        return nil
    }

    /// `dir`: `key` (32 bytes) is the content-encryption key.
    public static func dir(kid: String, key: [UInt8]) throws -> JWEKey {
        guard key.count == AES256GCM.keyByteCount else { throw JOSEError("JWE dir: key must be 32 bytes") }
        return JWEKey(kid: kid, algorithm: .dir, material: .symmetric(key))
    }

    /// `A256KW`: `kek` (32 bytes) wraps a fresh random CEK per message.
    public static func a256kw(kid: String, kek: [UInt8]) throws -> JWEKey {
        guard kek.count == AESKeyWrap.kekByteCount else { throw JOSEError("JWE A256KW: key must be 32 bytes") }
        return JWEKey(kid: kid, algorithm: .a256kw, material: .symmetric(kek))
    }

    /// `RSA-OAEP-256` for encrypting only.
    public static func rsaOAEP256(kid: String, publicKey: RSAPublicKey) -> JWEKey {
        JWEKey(kid: kid, algorithm: .rsaOAEP256, material: .rsaPublic(publicKey))
    }

    /// `RSA-OAEP-256` for decrypting (and encrypting, with the matching public key).
    public static func rsaOAEP256(kid: String, privateKey: RSAPrivateKey) -> JWEKey {
        JWEKey(kid: kid, algorithm: .rsaOAEP256, material: .rsaPrivate(privateKey, privateKey.publicKey))
    }

    /// `ECDH-ES+A256KW` for the P-256 public key of a recipient (a device): a fresh ephemeral key per message.
    public static func ecdhESA256KW(kid: String, publicKey: ECPublicKey) -> JWEKey {
        JWEKey(kid: kid, algorithm: .ecdhESA256KW, material: .ecPublic(publicKey))
    }

    /// `ECDH-ES+A256KW` for decrypting with the recipient's P-256 private key (and encrypting to its public key).
    public static func ecdhESA256KW(kid: String, privateKey: ECPrivateKey) -> JWEKey {
        JWEKey(kid: kid, algorithm: .ecdhESA256KW, material: .ecPrivate(privateKey))
    }

    /// Length in bytes of the encrypted-key part before base64url: 0 (`dir`), 40 (a wrapped 32-byte CEK:
    /// `A256KW`, `ECDH-ES+A256KW`), or the RSA modulus size.
    public var encryptedKeyByteCount: Int {
        switch material {
        case .symmetric: algorithm == .dir ? 0 : AESKeyWrap.wrappedCEKByteCount
        case .ecPublic, .ecPrivate: AESKeyWrap.wrappedCEKByteCount
        case .rsaPublic(let key): key.modulusByteCount
        case .rsaPrivate(_, let key): key.modulusByteCount
        }
    }
}
