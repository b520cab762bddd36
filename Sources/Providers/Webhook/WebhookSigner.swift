import SSLCrypto

/// Signs webhook deliveries as the Standard Webhooks specification says
/// (https://www.standardwebhooks.com): the signed content is `webhook-id.webhook-timestamp.body`, the signature
/// `v1,<base64 of HMAC-SHA256 with the secret's bytes>`, and `webhook-signature` is the space-separated list of
/// one such signature per secret, so that during a rotation receivers holding either secret verify.
public struct WebhookSigner: Sendable {
    /// The secrets' bytes, in the order configured.
    let keys: [[UInt8]]

    public struct InvalidSecret: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Secrets written `whsec_<standard base64>`, decoding to 24 to 64 bytes; at least one.
    public init(secrets: [String]) throws(InvalidSecret) {
        guard !secrets.isEmpty else { throw InvalidSecret(description: "at least one secret is required") }
        var keys: [[UInt8]] = []
        for (position, secret) in secrets.enumerated() {
            guard secret.hasPrefix("whsec_"), let bytes = Self.decodeBase64(secret.dropFirst("whsec_".count)) else {
                throw InvalidSecret(description: "secret \(position) must be 'whsec_' followed by standard base64")
            }
            guard (24...64).contains(bytes.count) else {
                throw InvalidSecret(description: "secret \(position) decodes to \(bytes.count) bytes; 24 to 64 are required")
            }
            keys.append(bytes)
        }
        self.keys = keys
    }

    /// The `webhook-signature` header value for one attempt.
    public func signature(id: String, timestamp: Int64, body: [UInt8]) -> String {
        var content = Array(id.utf8)
        content.append(UInt8(ascii: "."))
        content.append(contentsOf: String(timestamp).utf8)
        content.append(UInt8(ascii: "."))
        content.append(contentsOf: body)
        var parts: [String] = []
        for key in keys {
            guard let mac = try? HMACSHA256.authenticationCode(for: content, key: key) else { continue }
            parts.append("v1," + Self.encodeBase64(mac))
        }
        return parts.joined(separator: " ")
    }

    /// Standard base64 with padding (RFC 4648 §4).
    static func encodeBase64(_ bytes: [UInt8]) -> String {
        var text = Base64URL.encode(bytes)
        text = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while text.utf8.count % 4 != 0 { text += "=" }
        return text
    }

    static func decodeBase64(_ text: Substring) -> [UInt8]? {
        var body = text[...]
        while body.hasSuffix("=") { body = body.dropLast() }
        guard !body.contains("-"), !body.contains("_") else { return nil }
        return Base64URL.decode(String(body.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }))
    }
}
