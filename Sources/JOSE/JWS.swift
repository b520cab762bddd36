import SSLCrypto

/// Unsecured JWS (RFC 7515 §6 / RFC 7519 §6): header `{"alg":"none"}`, empty signature.
public enum JWS {
    /// base64url(`{"alg":"none"}`).
    static let unsecuredHeader: [UInt8] = Array("eyJhbGciOiJub25lIn0".utf8)

    /// Builds `base64url({"alg":"none"}) . base64url(payload) .` (trailing empty signature).
    public static func unsecured(payload: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(unsecuredLength(payloadLength: payload.count))
        out.append(contentsOf: unsecuredHeader)
        out.append(UInt8(ascii: "."))
        Base64URL.encode(payload, into: &out)
        out.append(UInt8(ascii: "."))
        return String(decoding: out, as: UTF8.self)
    }

    /// Exact length of `unsecured(payload:)` for a payload of `payloadLength` bytes.
    public static func unsecuredLength(payloadLength: Int) -> Int {
        unsecuredHeader.count + 1 + Base64URL.encodedLength(payloadLength) + 1
    }

    /// Returns the payload of an unsecured JWS. Strict: exactly three parts, `alg` = `none`,
    /// no `crit`, an empty signature, canonical base64url.
    public static func decodeUnsecured(compact: String) throws -> [UInt8] {
        try decodeUnsecured(CompactParts(compact))
    }

    static func decodeUnsecured(_ parts: CompactParts) throws -> [UInt8] {
        guard parts.count == 3 else { throw JOSEError("JWS: expected 3 parts, found \(parts.count)") }
        let header = try parts.header(0)
        guard try header.string("alg") == "none" else { throw JOSEError("JWS: only alg \"none\" is supported") }
        guard parts.raw(2).isEmpty else { throw JOSEError("JWS: an unsecured JWS must have an empty signature") }
        return try parts.decoded(1, "payload")
    }
}
