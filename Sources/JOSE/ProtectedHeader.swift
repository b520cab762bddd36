import SSLCrypto

/// Writing the fixed-shape JWE protected header `{"alg":"…","enc":"A256GCM","kid":"…"}`.
enum ProtectedHeader {
    /// The compact JSON header, key order alg, enc, kid, with `kid` JSON-escaped.
    static func json(algorithm: JWEAlgorithm, kid: String) -> [UInt8] {
        var out: [UInt8] = []
        out.append(contentsOf: #"{"alg":""#.utf8)
        out.append(contentsOf: algorithm.rawValue.utf8)
        out.append(contentsOf: #"","enc":""#.utf8)
        out.append(contentsOf: jweContentEncryption.utf8)
        out.append(contentsOf: #"","kid":""#.utf8)
        appendEscaped(kid, to: &out)
        out.append(contentsOf: #""}"#.utf8)
        return out
    }

    /// ASCII of base64url(`json(algorithm:kid:)`).
    static func encoded(algorithm: JWEAlgorithm, kid: String) -> [UInt8] {
        var out: [UInt8] = []
        Base64URL.encode(json(algorithm: algorithm, kid: kid), into: &out)
        return out
    }

    /// Byte length of the JSON header without building it.
    static func jsonLength(algorithm: JWEAlgorithm, kid: String) -> Int {
        #"{"alg":"","enc":"","kid":""}"#.utf8.count + algorithm.rawValue.utf8.count
            + jweContentEncryption.utf8.count + escapedLength(kid)
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
