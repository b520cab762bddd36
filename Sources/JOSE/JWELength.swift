import SSLCrypto

extension JWE {
    /// Exact length in bytes (= characters, all ASCII) of the compact JWE that `encrypt` produces for a
    /// payload of `payloadLength` bytes:
    /// `b64(header) . b64(encrypted key) . b64(12-byte IV) . b64(payload) . b64(16-byte tag)`,
    /// the encrypted key being 0 bytes for `dir`, 40 for `A256KW` and `ECDH-ES+A256KW` (whose header holds `epk`,
    /// always the same length) and `rsaModulusBytes` for `RSA-OAEP-256`.
    ///
    /// - Parameter kid: the key identifier as given to `JWEKey` (its JSON escaping is accounted for).
    public static func compactLength(
        payloadLength: Int, alg: JWEAlgorithm, kid: String, rsaModulusBytes: Int = 256
    ) -> Int {
        let headerLength = ProtectedHeader.jsonLength(algorithm: alg, kid: kid)
        let encryptedKeyLength = switch alg {
        case .dir: 0
        case .a256kw, .ecdhESA256KW: AESKeyWrap.wrappedCEKByteCount
        case .rsaOAEP256: rsaModulusBytes
        }
        return assembledLength(
            encodedHeaderLength: Base64URL.encodedLength(headerLength),
            encryptedKeyLength: encryptedKeyLength,
            payloadLength: payloadLength)
    }

    /// Exact length of the compact JWE that `encrypt(payload:key:)` produces for `payloadLength` bytes.
    public static func compactLength(payloadLength: Int, key: JWEKey) -> Int {
        assembledLength(
            encodedHeaderLength: key.algorithm == .ecdhESA256KW
                ? Base64URL.encodedLength(ProtectedHeader.jsonLength(algorithm: key.algorithm, kid: key.kid))
                : key.encodedHeader.count,
            encryptedKeyLength: key.encryptedKeyByteCount,
            payloadLength: payloadLength)
    }

    private static func assembledLength(encodedHeaderLength: Int, encryptedKeyLength: Int, payloadLength: Int) -> Int {
        encodedHeaderLength + 1
            + Base64URL.encodedLength(encryptedKeyLength) + 1
            + Base64URL.encodedLength(AES256GCM.ivByteCount) + 1
            + Base64URL.encodedLength(payloadLength) + 1
            + Base64URL.encodedLength(AES256GCM.tagByteCount)
    }
}
