import SSLCrypto

/// Test keys made with SSLCrypto.
enum RSAKeyFactory {
    /// A fresh 2048-bit RSA key as PKCS#8 PEM.
    static func pkcs8PEM() throws -> String {
        try RSAPrivateKey(generatingBits: 2048).pemRepresentation()
    }
}
