import SSLCrypto

/// JWE compact serialisation (RFC 7516 §7.1) with `enc` = `A256GCM` and `alg` = `dir`, `A256KW` or `RSA-OAEP-256`.
public enum JWE {
    /// Encrypts `payload` for `key`: header `{"alg":"…","enc":"A256GCM","kid":"…"}`, a fresh random
    /// CEK (except for `dir`) and 96-bit IV per call, AAD = ASCII of the encoded header (RFC 7516 §5.1).
    public static func encrypt(payload: [UInt8], key: JWEKey) throws -> String {
        let random: [UInt8]
        do {
            random = try SecureRandom.bytes(AES256GCM.ivByteCount + (key.algorithm == .dir ? 0 : AES256GCM.keyByteCount))
        } catch {
            throw JOSEError("JWE: \(error)")
        }
        let iv = Array(random[0..<AES256GCM.ivByteCount])
        let cek = key.algorithm == .dir ? nil : Array(random[AES256GCM.ivByteCount...])
        return try encrypt(payload: payload, key: key, cek: cek, iv: iv)
    }

    /// `encrypt(payload:key:)` once its random CEK (nil for `dir`, which uses the key itself) and IV are drawn.
    static func encrypt(payload: [UInt8], key: JWEKey, cek givenCEK: [UInt8]?, iv: [UInt8]) throws -> String {
        do {
            let cek: [UInt8]
            let encryptedKey: [UInt8]
            switch key.material {
            case .symmetric(let secret) where key.algorithm == .dir:
                cek = secret
                encryptedKey = []
            case .symmetric(let kek):
                cek = try requireCEK(givenCEK)
                encryptedKey = try AESKeyWrap.wrap(cek, kek: kek)
            case .rsaPublic(let publicKey), .rsaPrivate(_, let publicKey):
                cek = try requireCEK(givenCEK)
                encryptedKey = try publicKey.encryptOAEPSHA256(cek)
            }
            let sealed = try AES256GCM.seal(payload, key: cek, iv: iv, aad: key.encodedHeader)

            var out: [UInt8] = []
            out.reserveCapacity(compactLength(payloadLength: payload.count, key: key))
            out.append(contentsOf: key.encodedHeader)
            out.append(UInt8(ascii: "."))
            Base64URL.encode(encryptedKey, into: &out)
            out.append(UInt8(ascii: "."))
            Base64URL.encode(iv, into: &out)
            out.append(UInt8(ascii: "."))
            Base64URL.encode(sealed.ciphertext, into: &out)
            out.append(UInt8(ascii: "."))
            Base64URL.encode(sealed.tag, into: &out)
            return String(decoding: out, as: UTF8.self)
        } catch let error as CryptoError {
            throw JOSEError("JWE: \(error.message)")
        }
    }

    private static func requireCEK(_ cek: [UInt8]?) throws -> [UInt8] {
        guard let cek, cek.count == AES256GCM.keyByteCount else { throw JOSEError("JWE: CEK must be 32 bytes") }
        return cek
    }

    /// Decrypts a compact JWE, choosing the key with `keys(kid)` (`kid` is nil when the header has none).
    ///
    /// Strict: exactly five parts, canonical base64url, `enc` = `A256GCM`, `alg` equal to the key's,
    /// no `zip`/`crit`, exact key/IV/tag sizes, and any key-unwrap, RSA or tag failure is rejected with
    /// the same error.
    public static func decrypt(compact: String, keys: (String?) -> JWEKey?) throws -> [UInt8] {
        try decrypt(CompactParts(compact), keys: keys)
    }

    static func decrypt(_ parts: CompactParts, keys: (String?) -> JWEKey?) throws -> [UInt8] {
        guard parts.count == 5 else { throw JOSEError("JWE: expected 5 parts, found \(parts.count)") }
        let header = try parts.header(0)
        guard let algName = try header.string("alg"), let algorithm = JWEAlgorithm(rawValue: algName) else {
            throw JOSEError("JWE: unsupported or missing alg")
        }
        guard try header.string("enc") == jweContentEncryption else { throw JOSEError("JWE: enc must be A256GCM") }
        guard header["zip"] == nil else { throw JOSEError("JWE: compressed (zip) content is not supported") }
        let kid = try header.string("kid")
        guard let key = keys(kid) else { throw JOSEError("JWE: no key for kid \(kid.map { "\"\($0)\"" } ?? "(none)")") }
        guard key.algorithm == algorithm else {
            throw JOSEError("JWE: header alg \(algorithm.rawValue) does not match the key's \(key.algorithm.rawValue)")
        }

        let encryptedKey = try parts.decoded(1, "encrypted key")
        let iv = try parts.decoded(2, "IV")
        let ciphertext = try parts.decoded(3, "ciphertext")
        let tag = try parts.decoded(4, "tag")
        guard iv.count == AES256GCM.ivByteCount else { throw JOSEError("JWE: IV must be 12 bytes") }
        guard tag.count == AES256GCM.tagByteCount else { throw JOSEError("JWE: tag must be 16 bytes") }
        guard encryptedKey.count == key.encryptedKeyByteCount else {
            throw JOSEError("JWE: encrypted key must be \(key.encryptedKeyByteCount) bytes for \(algorithm.rawValue)")
        }

        let cek: [UInt8]
        switch key.material {
        case .symmetric(let secret) where algorithm == .dir:
            cek = secret
        case .symmetric(let kek):
            guard let unwrapped = try? AESKeyWrap.unwrap(encryptedKey, kek: kek),
                  unwrapped.count == AES256GCM.keyByteCount
            else { throw JOSEError.decryptionFailed }
            cek = unwrapped
        case .rsaPrivate(let privateKey, _):
            // RFC 7516 §11.5: on an RSA failure carry on with a random CEK so that the failure is only
            // visible as the (same) tag failure, not as a distinguishable error.
            if let decrypted = try? privateKey.decryptOAEPSHA256(encryptedKey),
               decrypted.count == AES256GCM.keyByteCount {
                cek = decrypted
            } else if let random = try? SecureRandom.bytes(AES256GCM.keyByteCount) {
                cek = random
            } else {
                throw JOSEError.decryptionFailed
            }
        case .rsaPublic:
            throw JOSEError("JWE: the key for kid \(key.kid) is public only and cannot decrypt")
        }

        guard let plaintext = try? AES256GCM.open(ciphertext, tag: tag, key: cek, iv: iv, aad: parts.raw(0)) else {
            throw JOSEError.decryptionFailed
        }
        return plaintext
    }
}
