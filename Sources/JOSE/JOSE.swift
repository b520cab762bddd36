/// Entry point for reading either kind of compact JOSE object the gateway emits.
public enum JOSE {
    /// Returns the payload of an unsecured JWS (3 parts, `alg` `none`) or of a JWE (5 parts), choosing
    /// the JWE key with `keys(kid)`. Any other shape is rejected.
    ///
    /// Note that an unsecured JWS carries no integrity protection: callers that require encryption must
    /// use `JWE.decrypt(compact:keys:)` instead.
    public static func decode(compact: String, keys: (String?) -> JWEKey?) throws -> [UInt8] {
        let parts = CompactParts(compact)
        switch parts.count {
        case 3: return try JWS.decodeUnsecured(parts)
        case 5: return try JWE.decrypt(parts, keys: keys)
        default: throw JOSEError("JOSE: expected 3 (JWS) or 5 (JWE) parts, found \(parts.count)")
        }
    }
}
