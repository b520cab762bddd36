import CompactJSON
import JOSE
import PushCore
import SSLCrypto

/// The device keys of v2 subscriptions (`encryption`): reading and checking the one a device sends, and the JWE key
/// its notifications are encrypted with.
///
/// The request member is `{"alg":"ECDH-ES+A256KW","jwk":{"kty":"EC","crv":"P-256","x":"…","y":"…","kid":"…"}}`, or
/// `{"alg":"RSA-OAEP-256","jwk":{"kty":"RSA","n":"…","e":"…","kid":"…"}}`. `kid` is optional; `use` (must be `enc`),
/// `alg` (must be the same), `key_ops` and `ext` (what WebCrypto exports) are accepted and not kept; a private
/// member (`d`, `p`, `q`, …) is refused: the private key never leaves the device.
public enum DeviceKey {
    /// The longest `kid` accepted: it is sent in every notification, where bytes are scarce.
    public static let maximumKidBytes = 128

    private static let privateMembers: Set<String> = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]
    private static let ignoredMembers: Set<String> = ["use", "alg", "key_ops", "ext", "kid", "kty"]

    /// Reads and checks `value`; the error says which field is wrong and why (the API answers it with 400).
    public static func parse(_ value: JSONValue) throws(EncryptionKeyError) -> DeviceEncryption {
        guard case .object(let members) = value else {
            throw EncryptionKeyError(#"'encryption' must be an object {"alg": "ECDH-ES+A256KW" or "RSA-OAEP-256", "jwk": the device's public key as a JWK}"#)
        }
        for name in JSONWriter.sortedKeys(members) where name != "alg" && name != "jwk" {
            throw EncryptionKeyError("'encryption': unknown field '\(name.string.prefix(64))' (expected 'alg' and 'jwk')")
        }
        guard case .string(let algName)? = members["alg"] else {
            throw EncryptionKeyError("'encryption.alg' is required: ECDH-ES+A256KW (a P-256 key) or RSA-OAEP-256 (an RSA key)")
        }
        guard let algorithm = DeviceEncryption.Algorithm(rawValue: algName) else {
            throw EncryptionKeyError("'encryption.alg' must be ECDH-ES+A256KW or RSA-OAEP-256, not '\(algName.prefix(64))'")
        }
        guard case .object(let jwk)? = members["jwk"] else {
            throw EncryptionKeyError("'encryption.jwk' is required: the device's public key as a JWK object")
        }
        func string(_ field: String) throws(EncryptionKeyError) -> String? {
            switch jwk[ExactString(field)] {
            case nil: return nil
            case .string(let text)?: return text
            default: throw EncryptionKeyError("'encryption.jwk.\(field)' must be a string")
            }
        }
        for name in JSONWriter.sortedKeys(jwk) where privateMembers.contains(name.string) {
            throw EncryptionKeyError(
                "'encryption.jwk' holds a private key member '\(name.string)': send the public key only (the private key stays on the device)")
        }
        if let use = try string("use"), use != "enc" {
            throw EncryptionKeyError("'encryption.jwk.use' must be 'enc', not '\(use.prefix(64))'")
        }
        if let jwkAlg = try string("alg"), jwkAlg != algName {
            throw EncryptionKeyError("'encryption.jwk.alg' is '\(jwkAlg.prefix(64))' but 'encryption.alg' is '\(algName)'")
        }
        let kid = try string("kid")
        if let kid {
            guard !kid.isEmpty, kid.utf8.count <= maximumKidBytes else {
                throw EncryptionKeyError("'encryption.jwk.kid' must be 1 to \(maximumKidBytes) bytes")
            }
        }
        let kty = try string("kty")
        let key: DeviceEncryption.PublicKey
        switch algorithm {
        case .ecdhESA256KW:
            guard kty == "EC" else {
                throw EncryptionKeyError("ECDH-ES+A256KW needs an EC key: 'encryption.jwk.kty' must be 'EC', not '\((kty ?? "(missing)").prefix(64))'")
            }
            let crv = try string("crv")
            guard crv == "P-256" else {
                throw EncryptionKeyError("'encryption.jwk.crv' must be 'P-256' (the only curve supported), not '\((crv ?? "(missing)").prefix(64))'")
            }
            let x = try coordinate("x", try string("x"))
            let y = try coordinate("y", try string("y"))
            do {
                _ = try ECPublicKey(x: x.bytes, y: y.bytes)
            } catch {
                throw EncryptionKeyError("'encryption.jwk' is not a valid P-256 public key: the point (x, y) is not on the curve")
            }
            key = .p256(x: x.text, y: y.text)
            for name in JSONWriter.sortedKeys(jwk) where !ignoredMembers.contains(name.string) && !["crv", "x", "y"].contains(name.string) {
                throw EncryptionKeyError("'encryption.jwk': unexpected member '\(name.string.prefix(64))' for an EC key")
            }
        case .rsaOAEP256:
            guard kty == "RSA" else {
                throw EncryptionKeyError("RSA-OAEP-256 needs an RSA key: 'encryption.jwk.kty' must be 'RSA', not '\((kty ?? "(missing)").prefix(64))'")
            }
            guard let n = try string("n"), let modulus = Base64URL.decode(n), let e = try string("e"), let exponent = Base64URL.decode(e)
            else { throw EncryptionKeyError("'encryption.jwk.n' and 'encryption.jwk.e' are required, in base64url (no padding)") }
            guard modulus.first != 0, exponent.first != 0 else {
                throw EncryptionKeyError("'encryption.jwk.n' and 'encryption.jwk.e' must have no leading zero byte (RFC 7518 §6.3.1)")
            }
            do {
                _ = try RSAPublicKey(modulus: modulus, exponent: exponent)
            } catch {
                throw EncryptionKeyError("'encryption.jwk' is not a usable RSA public key: \(error)")
            }
            key = .rsa(n: n, e: e)
            for name in JSONWriter.sortedKeys(jwk) where !ignoredMembers.contains(name.string) && !["n", "e"].contains(name.string) {
                throw EncryptionKeyError("'encryption.jwk': unexpected member '\(name.string.prefix(64))' for an RSA key")
            }
        }
        guard let encryption = DeviceEncryption(algorithm: algorithm, kid: kid, key: key) else {
            throw EncryptionKeyError("'encryption.jwk' is not a valid public key")
        }
        return encryption
    }

    /// A P-256 coordinate: base64url of exactly 32 bytes (RFC 7518 §6.2.1.2: the full size, leading zeros kept).
    private static func coordinate(_ name: String, _ text: String?) throws(EncryptionKeyError) -> (text: String, bytes: [UInt8]) {
        guard let text else { throw EncryptionKeyError("'encryption.jwk.\(name)' is required") }
        guard let bytes = Base64URL.decode(text) else {
            throw EncryptionKeyError("'encryption.jwk.\(name)' is not valid base64url (no padding, no whitespace)")
        }
        guard bytes.count == 32 else {
            throw EncryptionKeyError("'encryption.jwk.\(name)' must hold 32 bytes for P-256, not \(bytes.count)")
        }
        return (text, bytes)
    }

    /// The key a payload for this device is encrypted with (built per message: a subscription holds only the
    /// JWK text). Throws when the stored key is not a valid key (a forged state record).
    public static func jweKey(_ encryption: DeviceEncryption) throws(EncryptionKeyError) -> JWEKey {
        let kid = encryption.kid ?? ""
        do {
            switch encryption.key {
            case .p256(let x, let y):
                guard let xBytes = Base64URL.decode(x), let yBytes = Base64URL.decode(y) else {
                    throw EncryptionKeyError("device key: x or y is not base64url")
                }
                return JWEKey.ecdhESA256KW(kid: kid, publicKey: try ECPublicKey(x: xBytes, y: yBytes))
            case .rsa(let n, let e):
                guard let modulus = Base64URL.decode(n), let exponent = Base64URL.decode(e) else {
                    throw EncryptionKeyError("device key: n or e is not base64url")
                }
                return JWEKey.rsaOAEP256(kid: kid, publicKey: try RSAPublicKey(modulus: modulus, exponent: exponent))
            }
        } catch let error as EncryptionKeyError {
            throw error
        } catch {
            throw EncryptionKeyError("device key: \(error)")
        }
    }
}
