import CompactJSON
import JOSE
import SSLCrypto

/// Keys for decrypting v2 payloads, read from the text of a key file.
public enum KeyFile {
    /// Reads a single JWK, a JWK Set `{"keys": [JWK, …]}` (an app's encryption settings with `active` are one
    /// too), or a private key PEM (RSA: PKCS#8 or PKCS#1; a device's P-256 key: PKCS#8 or SEC 1), which carries no
    /// key id: `kid` names it (a caller reading a file typically defaults it to the file name). `kid` also names a
    /// JWK that has none.
    ///
    /// RSA keys must hold their private part (`privateKeyPEM`), EC keys theirs (`d`): a public key cannot decrypt.
    public static func load(text: String, kid: String? = nil) throws(EncryptionKeyError) -> [JWEKey] {
        if text.drop(while: { $0.isWhitespace }).hasPrefix("-----BEGIN") { return [try pemKey(text, kid: kid)] }
        let document: JSONValue
        do {
            document = try JSONParser.parse(text)
        } catch {
            throw EncryptionKeyError("key file: not a JWK, a JWK Set or a PEM private key (\(error))")
        }
        guard case .object(let members) = document else {
            throw EncryptionKeyError("key file: expected a JWK or a JWK Set (a JSON object)")
        }
        guard let set = members["keys"] else {
            return [try JWK.key(document, at: "key file", defaultKid: kid, needsPrivate: true)]
        }
        guard case .array(let elements) = set else {
            throw EncryptionKeyError("key file: field \"keys\" must be an array of JWKs")
        }
        guard !elements.isEmpty else { throw EncryptionKeyError("key file: the JWK Set holds no keys") }
        var keys: [JWEKey] = []
        for (index, element) in elements.enumerated() {
            let key = try JWK.key(element, at: "keys[\(index)]", needsPrivate: true)
            guard !keys.contains(where: { $0.kid == key.kid }) else {
                throw EncryptionKeyError("key \"\(key.kid)\": field \"kid\" is used twice")
            }
            keys.append(key)
        }
        return keys
    }

    private static func pemKey(_ text: String, kid: String?) throws(EncryptionKeyError) -> JWEKey {
        guard text.contains("PRIVATE KEY-----") else {
            throw EncryptionKeyError("key file: a PEM key file must hold a private key, RSA or P-256 (a public key cannot decrypt)")
        }
        guard let kid, !kid.isEmpty else {
            throw EncryptionKeyError("key file: a PEM key carries no key id: give its kid")
        }
        do {
            if text.contains("BEGIN EC PRIVATE KEY") { return JWEKey.ecdhESA256KW(kid: kid, privateKey: try ECPrivateKey(pem: text)) }
            do {
                return JWEKey.rsaOAEP256(kid: kid, privateKey: try RSAPrivateKey(pem: text))
            } catch {
                // A PKCS#8 key of another type: a device's P-256 key?
                guard let ecKey = try? ECPrivateKey(pem: text) else { throw error }
                return JWEKey.ecdhESA256KW(kid: kid, privateKey: ecKey)
            }
        } catch {
            throw EncryptionKeyError("key \"\(kid)\": \(error)")
        }
    }
}
