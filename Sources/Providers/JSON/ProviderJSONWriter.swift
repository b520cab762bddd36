/// Compact JSON output into a byte buffer, written by hand for the send path.
///
/// Strings are escaped minimally, like most serialisers in compact mode: `"` and `\` are backslash-escaped,
/// control characters use `\b \f \n \r \t` or `\u00XX`, everything else (including `/`, DEL and all non-ASCII)
/// is emitted as its UTF-8 bytes. The output is byte-for-byte what Python's
/// `json.dumps(value, separators=(",", ":"), ensure_ascii=False)` produces for strings.
struct ProviderJSONWriter {
    private(set) var bytes: [UInt8] = []

    init(reservingCapacity capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// Appends raw bytes that are already JSON.
    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends raw bytes that are already JSON.
    mutating func raw(_ json: some Sequence<UInt8>) {
        bytes.append(contentsOf: json)
    }

    /// Appends `value` as a JSON string literal, quotes included.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            // Copy runs of bytes that need no escaping in one go.
            var runStart = 0
            for (offset, byte) in utf8.enumerated() where byte < 0x20 || byte == 0x22 || byte == 0x5C {
                if runStart < offset { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<offset])) }
                appendEscape(byte)
                runStart = offset + 1
            }
            if runStart < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends an integer.
    mutating func integer(_ value: Int) {
        bytes.append(contentsOf: String(value).utf8)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private mutating func appendEscape(_ byte: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case 0x22: bytes.append(0x22)
        case 0x5C: bytes.append(0x5C)
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        default:
            bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            bytes.append(Self.hexDigits[Int(byte >> 4)])
            bytes.append(Self.hexDigits[Int(byte & 0x0F)])
        }
    }
}
