import COpenSSL

/// OpenSSL algorithm implementations fetched once from the default provider.
///
/// With OpenSSL 3, passing `EVP_sha256()` & co. makes every call perform an implicit (locked)
/// fetch; fetching once and reusing the result avoids that. Fetched `EVP_MD`/`EVP_CIPHER` objects are
/// immutable and documented as safe to share between threads; they are kept for the process lifetime.
enum Algorithms {
    nonisolated(unsafe) static let sha256: OpaquePointer = fetchDigest("SHA2-256")
    nonisolated(unsafe) static let aes256GCM: OpaquePointer = fetchCipher("AES-256-GCM")
    nonisolated(unsafe) static let aes128GCM: OpaquePointer = fetchCipher("AES-128-GCM")
    nonisolated(unsafe) static let aes256Wrap: OpaquePointer = fetchCipher("AES-256-WRAP")
    /// The single-step KDF of SP 800-56C (the Concat KDF of SP 800-56A), for JWE `ECDH-ES`.
    nonisolated(unsafe) static let sskdf: OpaquePointer = fetchKDF("SSKDF")

    private static func fetchDigest(_ name: String) -> OpaquePointer {
        guard let md = EVP_MD_fetch(nil, name, nil) else {
            // The default provider always has these; failing here means OpenSSL itself is broken.
            fatalError("\(CryptoError.openSSL("EVP_MD_fetch(\(name))"))")
        }
        return md
    }

    private static func fetchKDF(_ name: String) -> OpaquePointer {
        guard let kdf = EVP_KDF_fetch(nil, name, nil) else {
            fatalError("\(CryptoError.openSSL("EVP_KDF_fetch(\(name))"))")
        }
        return kdf
    }

    private static func fetchCipher(_ name: String) -> OpaquePointer {
        guard let cipher = EVP_CIPHER_fetch(nil, name, nil) else {
            fatalError("\(CryptoError.openSSL("EVP_CIPHER_fetch(\(name))"))")
        }
        return cipher
    }
}
