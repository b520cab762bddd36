import CompactJSON

/// A device's own public key, given with a v2 subscription (`encryption`, SPEC §2): the subscription's
/// notifications are then a JWE for this key alone, never for the app's keys.
///
/// PushCore holds the key as the JWK members it came with (base64url text) and checks only their shape: the
/// cryptographic checks (on the curve, the right size, a usable RSA key) are made when the key is accepted
/// (`PushFormats.DeviceKey`) and again each time a payload is encrypted for it.
///
/// Immutable and shared: every copy of a subscription's settings, notification and retry points to one instance.
public final class DeviceEncryption: Sendable, Hashable, CustomStringConvertible {
    /// The key-management algorithm (content encryption is always `A256GCM`).
    public enum Algorithm: String, Sendable, CaseIterable {
        /// ECDH-ES on P-256 with an ephemeral key per message, wrapping the CEK (RFC 7518 §4.6).
        case ecdhESA256KW = "ECDH-ES+A256KW"
        /// RSAES-OAEP with SHA-256 (RFC 7518 §4.3).
        case rsaOAEP256 = "RSA-OAEP-256"
    }

    /// The public key's JWK members (RFC 7518 §6), as base64url text.
    public enum PublicKey: Sendable, Hashable {
        /// `kty` `EC`, `crv` `P-256`: the coordinates, 32 bytes each (43 characters).
        case p256(x: String, y: String)
        /// `kty` `RSA`: the modulus and the exponent.
        case rsa(n: String, e: String)
    }

    public let algorithm: Algorithm
    /// The device's key id, written as `kid` in the JWE header and the v2 envelope; nil when it gave none.
    public let kid: String?
    public let key: PublicKey

    /// Nil when the algorithm does not fit the key (`ECDH-ES+A256KW` needs a P-256 key, `RSA-OAEP-256` an RSA key),
    /// when the members are not base64url, or when `kid` is empty.
    public init?(algorithm: Algorithm, kid: String?, key: PublicKey) {
        switch (algorithm, key) {
        case (.ecdhESA256KW, .p256(let x, let y)):
            guard x.utf8.count == 43, y.utf8.count == 43, Self.isBase64URL(x), Self.isBase64URL(y) else { return nil }
        case (.rsaOAEP256, .rsa(let n, let e)):
            guard Self.isBase64URL(n), Self.isBase64URL(e), !n.isEmpty, !e.isEmpty, n.utf8.count <= 4096, e.utf8.count <= 16
            else { return nil }
        default: return nil
        }
        if let kid, kid.isEmpty { return nil }
        self.algorithm = algorithm
        self.kid = kid
        self.key = key
    }

    private static func isBase64URL(_ text: String) -> Bool {
        text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
    }

    // MARK: JSON

    /// `{"alg":"…","jwk":{"kty":…,…,"kid":…}}`: the public JWK only, as the API returns it and the state topic
    /// stores it.
    public var json: JSONValue {
        var jwk: [ExactString: JSONValue]
        switch key {
        case .p256(let x, let y): jwk = ["kty": .string("EC"), "crv": .string("P-256"), "x": .string(x), "y": .string(y)]
        case .rsa(let n, let e): jwk = ["kty": .string("RSA"), "n": .string(n), "e": .string(e)]
        }
        if let kid { jwk["kid"] = .string(kid) }
        return .object(["alg": .string(algorithm.rawValue), "jwk": .object(jwk)])
    }

    /// Reads `json` back (the state topic's form); nil when it is not that form. Members of the JWK other than
    /// the public key's are refused, a private `d` above all.
    public static func decode(_ json: JSONValue) -> DeviceEncryption? {
        guard case .object(let members) = json, members.count == 2,
            let algorithm = members["alg"]?.stringValue.flatMap(Algorithm.init(rawValue:)),
            case .object(let jwk)? = members["jwk"]
        else { return nil }
        var kid: String? = nil
        if let member = jwk["kid"] {
            guard let text = member.stringValue else { return nil }
            kid = text
        }
        let key: PublicKey
        switch jwk["kty"]?.stringValue {
        case "EC":
            guard jwk["crv"]?.stringValue == "P-256", let x = jwk["x"]?.stringValue, let y = jwk["y"]?.stringValue,
                jwk.count == (kid == nil ? 4 : 5)
            else { return nil }
            key = .p256(x: x, y: y)
        case "RSA":
            guard let n = jwk["n"]?.stringValue, let e = jwk["e"]?.stringValue, jwk.count == (kid == nil ? 3 : 4) else { return nil }
            key = .rsa(n: n, e: e)
        default: return nil
        }
        return DeviceEncryption(algorithm: algorithm, kid: kid, key: key)
    }

    public var description: String { String(decoding: JSONWriter.bytes(json), as: UTF8.self) }

    // MARK: Identity and memory

    public static func == (left: DeviceEncryption, right: DeviceEncryption) -> Bool {
        guard left.algorithm == right.algorithm, (left.kid ?? "").bytesEqual(right.kid ?? ""), (left.kid == nil) == (right.kid == nil)
        else { return false }
        switch (left.key, right.key) {
        case (.p256(let x1, let y1), .p256(let x2, let y2)): return x1.bytesEqual(x2) && y1.bytesEqual(y2)
        case (.rsa(let n1, let e1), .rsa(let n2, let e2)): return n1.bytesEqual(n2) && e1.bytesEqual(e2)
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(algorithm)
        (kid ?? "").hashBytes(into: &hasher)
        switch key {
        case .p256(let x, let y):
            x.hashBytes(into: &hasher)
            y.hashBytes(into: &hasher)
        case .rsa(let n, let e):
            n.hashBytes(into: &hasher)
            e.hashBytes(into: &hasher)
        }
    }

    /// The stored properties, laid out as the class lays them out after its header.
    private struct Fields {
        var algorithm: Algorithm
        var kid: String?
        var key: PublicKey
    }

    /// Estimated heap bytes of this key (the object and its strings), counted per subscription that holds it
    /// (``AppIndex/byteCount``): about 260 bytes for a P-256 key, 700 for a 2048-bit RSA key.
    public var heapBytes: Int {
        var total = HeapCost.object(fields: MemoryLayout<Fields>.size) + (kid.map(HeapCost.string) ?? 0)
        switch key {
        case .p256(let x, let y): total += HeapCost.string(x) + HeapCost.string(y)
        case .rsa(let n, let e): total += HeapCost.string(n) + HeapCost.string(e)
        }
        return total
    }
}
