import COpenSSL

/// PEM parsing and writing through OpenSSL memory BIOs (internal helpers for the key classes).
enum PEM {
    /// Runs `body` with a read-only memory BIO over the UTF-8 bytes of `text`.
    static func withReadBIO<R>(_ text: String, _ body: (OpaquePointer) throws -> R) throws -> R {
        var text = text
        return try text.withUTF8 { utf8 in
            guard utf8.count < Int(Int32.max),
                  let bio = BIO_new_mem_buf(utf8.baseAddress, Int32(utf8.count))
            else { throw CryptoError.openSSL("BIO_new_mem_buf failed") }
            defer { BIO_free(bio) }
            return try body(bio)
        }
    }

    /// Runs `write` against a fresh memory BIO and returns what it wrote as a string.
    static func writeToString(_ what: String, _ write: (OpaquePointer) -> Int32) throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.openSSL("BIO_new failed") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw CryptoError.openSSL(what) }
        var data: UnsafeMutablePointer<CChar>? = nil
        // BIO_get_mem_data is a macro over BIO_ctrl(BIO_CTRL_INFO).
        let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &data)
        guard length > 0, let data else { throw CryptoError.openSSL(what) }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    /// Refuses to supply a passphrase, so encrypted keys fail instead of prompting on a terminal.
    static let noPassphrase: @convention(c) (
        UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?
    ) -> Int32 = { _, _, _, _ in 0 }
}

/// Checks that `pkey` is a plain RSA key of at least 2048 bits (RFC 7518 §3.3 / §4.3), freeing it if not.
func requireRSA(_ pkey: OpaquePointer, _ what: String) throws {
    guard EVP_PKEY_is_a(pkey, "RSA") == 1 else {
        EVP_PKEY_free(pkey)
        throw CryptoError("\(what): not an RSA key")
    }
    let bits = EVP_PKEY_get_bits(pkey)
    guard bits >= 2048 else {
        EVP_PKEY_free(pkey)
        throw CryptoError("\(what): RSA key of \(bits) bits is too small (2048 minimum)")
    }
}
