import COpenSSL

/// The Concat KDF of NIST SP 800-56A §5.8.1 with SHA-256, as JWE `ECDH-ES` uses it (RFC 7518 §4.6.2), computed by
/// OpenSSL's single-step KDF (`SSKDF`, which is that KDF).
public enum ConcatKDF {
    /// The `keyBits`-bit key derived from the shared secret `z` with
    /// `OtherInfo = AlgorithmID || PartyUInfo || PartyVInfo || SuppPubInfo`, where AlgorithmID, PartyUInfo and
    /// PartyVInfo are each a 32-bit big-endian length followed by the bytes (`algorithmID` is the `enc` value for
    /// direct key agreement, the `alg` value with key wrapping), and SuppPubInfo is `keyBits` as 32 bits.
    public static func sha256(
        z: [UInt8], algorithmID: String, partyUInfo: [UInt8] = [], partyVInfo: [UInt8] = [], keyBits: Int
    ) throws -> [UInt8] {
        guard keyBits > 0, keyBits % 8 == 0, keyBits <= 8 * 1024 else {
            throw CryptoError("Concat KDF: unsupported key length of \(keyBits) bits")
        }
        let info = otherInfo(algorithmID: algorithmID, partyUInfo: partyUInfo, partyVInfo: partyVInfo, keyBits: keyBits)
        ERR_clear_error()
        guard let ctx = EVP_KDF_CTX_new(Algorithms.sskdf) else { throw CryptoError.openSSL("EVP_KDF_CTX_new failed") }
        defer { EVP_KDF_CTX_free(ctx) }
        var failed = false
        let key = z.withUnsafeBufferPointer { secret in
            info.withUnsafeBufferPointer { other in
                "digest".withCString { digestName in
                    "SHA2-256".withCString { digest in
                        "key".withCString { keyName in
                            "info".withCString { infoName in
                                var params = [
                                    OSSL_PARAM_construct_utf8_string(digestName, UnsafeMutablePointer(mutating: digest), 0),
                                    OSSL_PARAM_construct_octet_string(
                                        keyName, UnsafeMutableRawPointer(mutating: secret.baseAddress), secret.count),
                                    OSSL_PARAM_construct_octet_string(
                                        infoName, UnsafeMutableRawPointer(mutating: other.baseAddress), other.count),
                                    OSSL_PARAM_construct_end(),
                                ]
                                return makeBytes(count: keyBits / 8) { out in
                                    guard EVP_KDF_derive(ctx, out, keyBits / 8, &params) == 1 else {
                                        failed = true
                                        return 0
                                    }
                                    return keyBits / 8
                                }
                            }
                        }
                    }
                }
            }
        }
        if failed { throw CryptoError.openSSL("Concat KDF (SSKDF) failed") }
        return key
    }

    /// `AlgorithmID || PartyUInfo || PartyVInfo || SuppPubInfo` (RFC 7518 §4.6.2); SuppPrivInfo is empty.
    static func otherInfo(algorithmID: String, partyUInfo: [UInt8], partyVInfo: [UInt8], keyBits: Int) -> [UInt8] {
        func bigEndian32(_ value: Int) -> [UInt8] {
            let value = UInt32(truncatingIfNeeded: value)
            return [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
        }
        let algorithm = Array(algorithmID.utf8)
        return bigEndian32(algorithm.count) + algorithm + bigEndian32(partyUInfo.count) + partyUInfo
            + bigEndian32(partyVInfo.count) + partyVInfo + bigEndian32(keyBits)
    }
}
