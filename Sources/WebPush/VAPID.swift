import CompactJSON
import SSLCrypto

/// Voluntary application server identification for Web Push (RFC 8292): an ES256 JWT naming the push service's
/// origin (`aud`), an expiry within 24 hours (`exp`) and a contact (`sub`), sent with the application server's
/// public key as `Authorization: vapid t=<JWT>, k=<key>`.
public struct VAPIDSigner: Sendable {
    public let key: ECPrivateKey
    /// `mailto:` or `https:` contact of the app's operator.
    public let subject: String
    /// The public key as the `k` parameter: the uncompressed point, base64url without padding (the
    /// `applicationServerKey` a page subscribes with).
    public let publicKey: String

    public init(key: ECPrivateKey, subject: String) throws {
        self.key = key
        self.subject = subject
        self.publicKey = try Base64URL.encode(key.publicKey.uncompressedPoint)
    }

    /// The `Authorization` header's value for a push to `audience` (a push service origin) valid until `expiresAt`
    /// (seconds since the epoch; RFC 8292 §2 allows at most 24 hours ahead).
    public func authorization(audience: String, expiresAt: Int64) throws -> String {
        "vapid t=\(try token(audience: audience, expiresAt: expiresAt)), k=\(publicKey)"
    }

    /// The signed JWT: header `{"typ":"JWT","alg":"ES256"}`, claims `aud`, `exp`, `sub`.
    public func token(audience: String, expiresAt: Int64) throws -> String {
        var claims: [UInt8] = Array(#"{"aud":"#.utf8)
        JSONWriter.writeString(audience, into: &claims)
        claims += Array(#","exp":\#(expiresAt),"sub":"#.utf8)
        JSONWriter.writeString(subject, into: &claims)
        claims.append(UInt8(ascii: "}"))
        let signingInput = Base64URL.encode(Array(#"{"typ":"JWT","alg":"ES256"}"#.utf8)) + "." + Base64URL.encode(claims)
        let signature = try key.signES256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// The origin of a push endpoint (`https://host[:port]`), the JWT's audience; nil when `endpoint` is not an
    /// absolute http(s) URL with a host.
    public static func audience(ofEndpoint endpoint: String) -> String? {
        let utf8 = endpoint.utf8
        let scheme: Int
        if utf8.starts(with: "https://".utf8) { scheme = 8 } else if utf8.starts(with: "http://".utf8) { scheme = 7 } else { return nil }
        let rest = utf8.dropFirst(scheme)
        let end = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        guard end > rest.startIndex, !rest[rest.startIndex..<end].contains(UInt8(ascii: "@")) else { return nil }
        return String(endpoint[endpoint.startIndex..<end])
    }
}
