import SSLCrypto

/// Writing the fixed-shape JWE protected header `{"alg":"…","enc":"A256GCM","kid":"…"}`, and for `ECDH-ES+A256KW`
/// `{"alg":"ECDH-ES+A256KW","enc":"A256GCM","epk":{"kty":"EC","crv":"P-256","x":"…","y":"…"},"kid":"…"}`
/// (`kid` left out when the key has none).
enum ProtectedHeader {
    /// The compact JSON header, key order alg, enc, epk, kid, with `kid` JSON-escaped and left out when empty.
    /// `epk`: the ephemeral P-256 public key's coordinates (32 bytes each), for `ECDH-ES+A256KW` only.
    static func json(algorithm: JWEAlgorithm, kid: String, epk: (x: [UInt8], y: [UInt8])?) -> [UInt8] {
        var out: [UInt8] = []
        out.append(contentsOf: #"{"alg":""#.utf8)
        out.append(contentsOf: algorithm.rawValue.utf8)
        out.append(contentsOf: #"","enc":""#.utf8)
        out.append(contentsOf: jweContentEncryption.utf8)
        out.append(UInt8(ascii: "\""))
        if let epk {
            out.append(contentsOf: #","epk":{"kty":"EC","crv":"P-256","x":""#.utf8)
            Base64URL.encode(epk.x, into: &out)
            out.append(contentsOf: #"","y":""#.utf8)
            Base64URL.encode(epk.y, into: &out)
            out.append(contentsOf: #""}"#.utf8)
        }
        if !kid.isEmpty {
            out.append(contentsOf: #","kid":""#.utf8)
            appendEscaped(kid, to: &out)
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// ASCII of base64url(`json(algorithm:kid:epk:)`).
    static func encoded(algorithm: JWEAlgorithm, kid: String, epk: (x: [UInt8], y: [UInt8])?) -> [UInt8] {
        var out: [UInt8] = []
        Base64URL.encode(json(algorithm: algorithm, kid: kid, epk: epk), into: &out)
        return out
    }

    /// `,"epk":{"kty":"EC","crv":"P-256","x":"<43>","y":"<43>"}`: the same length for every ephemeral key.
    static let epkLength = #","epk":{"kty":"EC","crv":"P-256","x":"","y":""}"#.utf8.count + 2 * Base64URL.encodedLength(32)

    /// Byte length of the JSON header without building it (`epk` included for `ECDH-ES+A256KW`).
    static func jsonLength(algorithm: JWEAlgorithm, kid: String) -> Int {
        #"{"alg":"","enc":""}"#.utf8.count + algorithm.rawValue.utf8.count + jweContentEncryption.utf8.count
            + (algorithm == .ecdhESA256KW ? epkLength : 0)
            + (kid.isEmpty ? 0 : #","kid":"""#.utf8.count + escapedLength(kid))
    }

    /// Appends `text` as the inside of a JSON string, pure ASCII: `"` and `\\` escaped, `\b \f \n \r \t`
    /// short forms, every other control character, DEL and non-ASCII as `\uXXXX` (lower-case hex,
    /// surrogate pairs above U+FFFF). This is byte for byte what Python's `json.dumps` writes by default,
    /// which matters: some libraries (joserfc) re-serialise the parsed header to compute the AAD.
    static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        for scalar in text.unicodeScalars {
            let value = scalar.value
            switch value {
            case 0x22: out.append(contentsOf: [0x5C, 0x22])  // \"
            case 0x5C: out.append(contentsOf: [0x5C, 0x5C])  // \\
            case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0x20..<0x7F: out.append(UInt8(value))
            case 0x10000...:
                let offset = value - 0x10000
                appendUnicodeEscape(0xD800 + (offset >> 10), to: &out)
                appendUnicodeEscape(0xDC00 + (offset & 0x3FF), to: &out)
            default: appendUnicodeEscape(value, to: &out)
            }
        }
    }

    private static func appendUnicodeEscape(_ unit: UInt32, to out: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"
        out.append(contentsOf: [0x5C, UInt8(ascii: "u")])
        hex.withUTF8Buffer { digits in
            for shift in stride(from: 12, through: 0, by: -4) {
                out.append(digits[Int((unit >> UInt32(shift)) & 0xF)])
            }
        }
    }

    /// Length of `appendEscaped(text)`.
    static func escapedLength(_ text: String) -> Int {
        var length = 0
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x22, 0x5C, 0x08, 0x0C, 0x0A, 0x0D, 0x09: length += 2
            case 0x20..<0x7F: length += 1
            case 0x10000...: length += 12
            default: length += 6
            }
        }
        return length
    }
}
