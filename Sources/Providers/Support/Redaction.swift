/// Log-safe stand-ins for secrets: push tokens, OAuth tokens and keys never appear in clear in logs.
public enum Redaction {
    /// An 8-hex-digit fingerprint of `secret` for correlating log lines, e.g. `"tok#3f2a9c01"`: FNV-1a 64
    /// with a MurmurHash3 finaliser, top 32 bits. Not a cryptographic hash, but 32 bits of a 64-bit digest of
    /// a long random token cannot be turned back into the token.
    public static func fingerprint(_ secret: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in secret.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        hash ^= hash >> 33
        hash &*= 0xff51_afd7_ed55_8ccd
        hash ^= hash >> 33
        hash &*= 0xc4ce_b9fe_1a85_ec53
        hash ^= hash >> 33
        let prefix = String(hash >> 32, radix: 16)
        return "tok#" + String(repeating: "0", count: 8 - prefix.count) + prefix
    }
}
