/// The JWE key-management algorithms supported here (RFC 7518 §4); content encryption is always `A256GCM`.
public enum JWEAlgorithm: String, Sendable, CaseIterable {
    /// Direct use of a shared 256-bit key as the CEK (RFC 7518 §4.5).
    case dir = "dir"
    /// A random CEK wrapped with AES Key Wrap under a 256-bit KEK (RFC 7518 §4.4).
    case a256kw = "A256KW"
    /// A random CEK encrypted with RSAES-OAEP, SHA-256 and MGF1-SHA-256 (RFC 7518 §4.3).
    case rsaOAEP256 = "RSA-OAEP-256"
    /// ECDH-ES key agreement on P-256 with an ephemeral key per message, its Concat KDF output (SHA-256) wrapping a
    /// random CEK with AES Key Wrap (RFC 7518 §4.6); the ephemeral public key travels in the header as `epk`.
    case ecdhESA256KW = "ECDH-ES+A256KW"
}

/// The only content-encryption algorithm supported (RFC 7518 §5.3).
public let jweContentEncryption = "A256GCM"
