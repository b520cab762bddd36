import CompactJSON
import JOSE
import SSLCrypto

/// Why encryption keys could not be read. The message names the key (its `kid`, or its position when it has
/// none) and the field at fault.
public struct EncryptionKeyError: Error, CustomStringConvertible, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Reading one JWK into a `JWEKey`.
///
/// Symmetric: `{"kty":"oct","kid":"k1","alg":"dir"|"A256KW","k":"<base64url of 32 bytes>"}`.
/// RSA: `{"kty":"RSA","kid":"k3","alg":"RSA-OAEP-256","publicKeyPEM":"…"}` or with `privateKeyPEM` (both may be
/// given; they must then match).
/// EC (a device's key, for `ECDH-ES+A256KW`; `alg` may be left out): `{"kty":"EC","crv":"P-256","x":"…","y":"…"}`,
/// with `d` to decrypt.
/// Optional `use` must be `enc`, optional `enc` must be `A256GCM`; other members are ignored.
enum JWK {
    /// Reads `value` (found at `position`, e.g. `keys[0]`), using `defaultKid` when it has no `kid`.
    /// `needsPrivate`: the key is for decrypting, so an RSA key must hold its private part.
    static func key(
        _ value: JSONValue, at position: String, defaultKid: String? = nil, needsPrivate: Bool = false
    ) throws(EncryptionKeyError) -> JWEKey {
        guard case .object(let members) = value else {
            throw EncryptionKeyError("\(position): a key must be a JSON object (a JWK)")
        }
        let kid: String
        switch members["kid"] {
        case .string(let text) where !text.isEmpty: kid = text
        case nil:
            guard let defaultKid, !defaultKid.isEmpty else {
                throw EncryptionKeyError("\(position): field \"kid\" is missing")
            }
            kid = defaultKid
        default: throw EncryptionKeyError("\(position): field \"kid\" must be a non-empty string")
        }
        let name = "key \"\(kid)\""

        func string(_ field: String) throws(EncryptionKeyError) -> String? {
            switch members[ExactString(field)] {
            case nil: return nil
            case .string(let text): return text
            default: throw EncryptionKeyError("\(name): field \"\(field)\" must be a string")
            }
        }
        func required(_ field: String) throws(EncryptionKeyError) -> String {
            guard let text = try string(field) else { throw EncryptionKeyError("\(name): field \"\(field)\" is missing") }
            return text
        }

        if let use = try string("use"), use != "enc" {
            throw EncryptionKeyError("\(name): field \"use\" must be \"enc\", not \"\(use)\"")
        }
        if let enc = try string("enc"), enc != jweContentEncryption {
            throw EncryptionKeyError("\(name): field \"enc\" must be \"\(jweContentEncryption)\", not \"\(enc)\"")
        }
        let kty = try required("kty")
        let algName = try kty == "EC" ? string("alg") ?? JWEAlgorithm.ecdhESA256KW.rawValue : required("alg")
        guard let algorithm = JWEAlgorithm(rawValue: algName) else {
            throw EncryptionKeyError(
                "\(name): field \"alg\" must be \"dir\", \"A256KW\", \"RSA-OAEP-256\" or \"ECDH-ES+A256KW\", not \"\(algName)\"")
        }

        switch kty {
        case "EC":
            guard algorithm == .ecdhESA256KW else {
                throw EncryptionKeyError("\(name): field \"alg\" \(algName) needs \"kty\":\"\(algorithm == .rsaOAEP256 ? "RSA" : "oct")\", not \"EC\"")
            }
            guard try string("crv") == "P-256" else { throw EncryptionKeyError("\(name): field \"crv\" must be \"P-256\"") }
            func coordinate(_ field: String) throws(EncryptionKeyError) -> [UInt8] {
                guard let bytes = Base64URL.decode(try required(field)), bytes.count == 32 else {
                    throw EncryptionKeyError("\(name): field \"\(field)\" must be base64url of 32 bytes")
                }
                return bytes
            }
            let x = try coordinate("x"), y = try coordinate("y")
            do {
                if members["d"] != nil {
                    return JWEKey.ecdhESA256KW(kid: kid, privateKey: try ECPrivateKey(d: try coordinate("d"), x: x, y: y))
                }
                if needsPrivate {
                    throw EncryptionKeyError("\(name): an EC public key cannot decrypt: field \"d\" is missing")
                }
                return JWEKey.ecdhESA256KW(kid: kid, publicKey: try ECPublicKey(x: x, y: y))
            } catch let error as EncryptionKeyError {
                throw error
            } catch {
                throw EncryptionKeyError("\(name): \(error)")
            }
        case "oct":
            guard algorithm != .rsaOAEP256, algorithm != .ecdhESA256KW else {
                throw EncryptionKeyError("\(name): field \"alg\" \(algName) needs \"kty\":\"\(algorithm == .rsaOAEP256 ? "RSA" : "EC")\", not \"oct\"")
            }
            let encoded = try required("k")
            guard let secret = Base64URL.decode(encoded) else {
                throw EncryptionKeyError("\(name): field \"k\" is not valid base64url (no padding, no whitespace)")
            }
            guard secret.count == 32 else {
                throw EncryptionKeyError("\(name): field \"k\" must hold 32 bytes (256 bits), not \(secret.count)")
            }
            do {
                return algorithm == .dir ? try JWEKey.dir(kid: kid, key: secret) : try JWEKey.a256kw(kid: kid, kek: secret)
            } catch {
                throw EncryptionKeyError("\(name): field \"k\": \(error)")
            }
        case "RSA":
            guard algorithm == .rsaOAEP256 else {
                throw EncryptionKeyError("\(name): field \"alg\" \(algName) needs \"kty\":\"oct\", not \"RSA\"")
            }
            let privatePEM = try string("privateKeyPEM")
            let publicPEM = try string("publicKeyPEM")
            if privatePEM == nil, publicPEM == nil {
                let hint = members["n"] != nil ? " (JWK \"n\"/\"e\" members are not supported)" : ""
                throw EncryptionKeyError("\(name): an RSA key needs field \"publicKeyPEM\" or \"privateKeyPEM\"\(hint)")
            }
            var publicKey: RSAPublicKey? = nil
            if let publicPEM {
                do {
                    publicKey = try RSAPublicKey(pem: publicPEM)
                } catch {
                    throw EncryptionKeyError("\(name): field \"publicKeyPEM\": \(error)")
                }
            }
            guard let privatePEM else {
                if needsPrivate {
                    throw EncryptionKeyError("\(name): an RSA public key cannot decrypt: field \"privateKeyPEM\" is missing")
                }
                guard let publicKey else { throw EncryptionKeyError("\(name): field \"publicKeyPEM\" is missing") }
                return JWEKey.rsaOAEP256(kid: kid, publicKey: publicKey)
            }
            let privateKey: RSAPrivateKey
            do {
                privateKey = try RSAPrivateKey(pem: privatePEM)
            } catch {
                throw EncryptionKeyError("\(name): field \"privateKeyPEM\": \(error)")
            }
            if let publicKey {
                let matches = (try? publicKey.pemRepresentation()) == (try? privateKey.publicKey.pemRepresentation())
                guard matches else {
                    throw EncryptionKeyError("\(name): field \"publicKeyPEM\" is not the public key of \"privateKeyPEM\"")
                }
            }
            return JWEKey.rsaOAEP256(kid: kid, privateKey: privateKey)
        default:
            throw EncryptionKeyError("\(name): field \"kty\" must be \"oct\", \"RSA\" or \"EC\", not \"\(kty)\"")
        }
    }
}
