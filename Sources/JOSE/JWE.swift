import CompactJSON
import SSLCrypto

/// JWE compact serialisation (RFC 7516 §7.1) with `enc` = `A256GCM` and `alg` = `dir`, `A256KW`, `RSA-OAEP-256` or
/// `ECDH-ES+A256KW` (P-256).
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

    /// `encrypt(payload:key:)` once its random CEK (nil for `dir`, which uses the key itself) and IV are drawn;
    /// `ephemeral` is the `ECDH-ES` key of the message (drawn here when nil; given by tests only).
    static func encrypt(
        payload: [UInt8], key: JWEKey, cek givenCEK: [UInt8]?, iv: [UInt8], ephemeral: ECPrivateKey? = nil
    ) throws -> String {
        do {
            let cek: [UInt8]
            let encryptedKey: [UInt8]
            var header = key.encodedHeader
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
            case .ecPublic, .ecPrivate:
                let recipient: ECPublicKey
                switch key.material {
                case .ecPrivate(let privateKey): recipient = privateKey.publicKey
                case .ecPublic(let publicKey): recipient = publicKey
                default: throw JOSEError("JWE: not an EC key")
                }
                cek = try requireCEK(givenCEK)
                // RFC 7518 §4.6: a fresh ephemeral key per message, Z = ECDH(ephemeral, recipient), the KEK from the
                // Concat KDF with AlgorithmID = the alg value (key wrapping), no apu/apv, 256 bits.
                let ephemeralKey = try ephemeral ?? ECPrivateKey()
                let kek = try ConcatKDF.sha256(
                    z: try ephemeralKey.sharedSecret(with: recipient), algorithmID: key.algorithm.rawValue,
                    keyBits: 8 * AESKeyWrap.kekByteCount)
                encryptedKey = try AESKeyWrap.wrap(cek, kek: kek)
                header = ProtectedHeader.encoded(
                    algorithm: key.algorithm, kid: key.kid, epk: try ephemeralKey.publicKey.coordinates)
            }
            let sealed = try AES256GCM.seal(payload, key: cek, iv: iv, aad: header)

            var out: [UInt8] = []
            out.reserveCapacity(compactLength(payloadLength: payload.count, key: key))
            out.append(contentsOf: header)
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
        case .ecPrivate(let privateKey):
            cek = try agreedCEK(parts, privateKey: privateKey, algorithm: algorithm, encryptedKey: encryptedKey)
        case .rsaPublic, .ecPublic:
            throw JOSEError("JWE: the key for kid \(key.kid) is public only and cannot decrypt")
        }

        guard let plaintext = try? AES256GCM.open(ciphertext, tag: tag, key: cek, iv: iv, aad: parts.raw(0)) else {
            throw JOSEError.decryptionFailed
        }
        return plaintext
    }

    /// `ECDH-ES+A256KW` on the receiving side: the header's `epk` (a P-256 public key, checked on the curve),
    /// `Z` with `privateKey`, the KEK from the Concat KDF (with the header's `apu`/`apv` when present), the CEK
    /// unwrapped. A bad `epk` is refused by name; an unwrap failure is the common decryption failure.
    private static func agreedCEK(
        _ parts: CompactParts, privateKey: ECPrivateKey, algorithm: JWEAlgorithm, encryptedKey: [UInt8]
    ) throws -> [UInt8] {
        guard case .object(let header)? = try? JSONParser.parse(try parts.decoded(0, "protected header")),
              case .object(let epk)? = header["epk"]
        else { throw JOSEError("JWE: ECDH-ES needs an \"epk\" object in the protected header") }
        guard epk["kty"] == .string("EC"), epk["crv"] == .string("P-256"),
              case .string(let xText)? = epk["x"], case .string(let yText)? = epk["y"],
              let x = Base64URL.decode(xText), let y = Base64URL.decode(yText), epk["d"] == nil
        else { throw JOSEError("JWE: \"epk\" must be a P-256 public JWK (kty EC, crv P-256, x, y)") }
        func party(_ name: ExactString) throws -> [UInt8] {
            switch header[name] {
            case nil: return []
            case .string(let text)?:
                guard let bytes = Base64URL.decode(text) else { throw JOSEError("JWE: \(name.string) is not valid base64url") }
                return bytes
            default: throw JOSEError("JWE: \(name.string) must be a string")
            }
        }
        let ephemeral: ECPublicKey
        do {
            ephemeral = try ECPublicKey(x: x, y: y)
        } catch {
            throw JOSEError("JWE: \"epk\" is not a valid P-256 public key: \(error)")
        }
        do {
            let kek = try ConcatKDF.sha256(
                z: try privateKey.sharedSecret(with: ephemeral), algorithmID: algorithm.rawValue,
                partyUInfo: try party("apu"), partyVInfo: try party("apv"), keyBits: 8 * AESKeyWrap.kekByteCount)
            guard let cek = try? AESKeyWrap.unwrap(encryptedKey, kek: kek), cek.count == AES256GCM.keyByteCount else {
                throw JOSEError.decryptionFailed
            }
            return cek
        } catch let error as CryptoError {
            throw JOSEError("JWE: \(error.message)")
        }
    }
}
