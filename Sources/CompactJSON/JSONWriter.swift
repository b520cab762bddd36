/// Compact JSON serialisation, byte-exact and deterministic: object keys sorted by their UTF-8 bytes,
/// numbers as their lexeme, strings escaped minimally (`"`, `\` and control characters; `/` and non-ASCII
/// are written as they are).
public enum JSONWriter {
    public static func bytes(_ value: JSONValue) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(64)
        write(value, into: &output)
        return output
    }

    public static func string(_ value: JSONValue) -> String {
        String(decoding: bytes(value), as: UTF8.self)
    }

    public static func write(_ value: JSONValue, into output: inout [UInt8]) {
        switch value {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let flag): output.append(contentsOf: (flag ? "true" : "false").utf8)
        case .number(let lexeme): output.append(contentsOf: lexeme.utf8)
        case .string(let text): writeString(text, into: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { output.append(UInt8(ascii: ",")) }
                write(element, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            var first = true
            for key in sortedKeys(members) {
                guard let member = members[key] else { continue }
                if !first { output.append(UInt8(ascii: ",")) }
                first = false
                writeString(key.string, into: &output)
                output.append(UInt8(ascii: ":"))
                write(member, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// Keys in UTF-8 byte order.
    @inlinable
    public static func sortedKeys<Value>(_ members: [ExactString: Value]) -> [ExactString] { members.keys.sorted() }

    /// Keys in UTF-8 byte order.
    @inlinable
    public static func sortedKeys<Value>(_ members: [String: Value]) -> [String] {
        members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `text` as a JSON string literal: byte for byte what Python's
    /// `json.dumps(text, ensure_ascii=False)` writes. Runs that need no escaping are copied in one go.
    public static func writeString(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            for (offset, byte) in utf8.enumerated() where byte < 0x20 || byte == 0x22 || byte == 0x5C {
                if runStart < offset { output.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<offset])) }
                output.append(0x5C)
                switch byte {
                case 0x22: output.append(0x22)
                case 0x5C: output.append(0x5C)
                case 0x0A: output.append(UInt8(ascii: "n"))
                case 0x0D: output.append(UInt8(ascii: "r"))
                case 0x09: output.append(UInt8(ascii: "t"))
                case 0x08: output.append(UInt8(ascii: "b"))
                case 0x0C: output.append(UInt8(ascii: "f"))
                default:
                    output.append(contentsOf: "u00".utf8)
                    output.append(hexDigits[Int(byte >> 4)])
                    output.append(hexDigits[Int(byte & 0x0F)])
                }
                runStart = offset + 1
            }
            if runStart < utf8.count { output.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        }
        output.append(UInt8(ascii: "\""))
    }

    /// The length in bytes of `text` written as a JSON string literal, without building it.
    public static func stringLiteralLength(_ text: String) -> Int {
        var length = 2
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09, 0x08, 0x0C: length += 2
            case 0x00..<0x20: length += 6
            default: length += 1
            }
        }
        return length
    }
}
