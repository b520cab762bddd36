/// A strict reader for JOSE header JSON objects (RFC 8259), without Foundation.
///
/// It returns the string-valued members and the names of all members; other values are validated and
/// skipped. Duplicate member names are rejected (RFC 7515 §4 allows rejecting them).
struct HeaderReader {
    /// Top-level members: string values decoded, every other value recorded as `nil`.
    typealias Members = [String: String?]

    private let bytes: [UInt8]
    private var index = 0
    private static let maximumDepth = 16

    /// Parses `json` as one object; nil when it is not exactly one well-formed JSON object.
    static func members(of json: [UInt8]) -> Members? {
        var reader = HeaderReader(bytes: json)
        return reader.readTopLevel()
    }

    private init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    private mutating func readTopLevel() -> Members? {
        skipWhitespace()
        guard consume(UInt8(ascii: "{")) else { return nil }
        var members: Members = [:]
        skipWhitespace()
        if !consume(UInt8(ascii: "}")) {
            repeat {
                skipWhitespace()
                guard let name = readString() else { return nil }
                skipWhitespace()
                guard consume(UInt8(ascii: ":")), members[name] == nil else { return nil }
                skipWhitespace()
                if peek == UInt8(ascii: "\"") {
                    guard let value = readString() else { return nil }
                    members[name] = .some(value)
                } else {
                    guard skipValue(depth: 1) else { return nil }
                    members[name] = .some(nil)
                }
                skipWhitespace()
            } while consume(UInt8(ascii: ","))
            guard consume(UInt8(ascii: "}")) else { return nil }
        }
        skipWhitespace()
        return index == bytes.count ? members : nil
    }

    private var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func consume(_ byte: UInt8) -> Bool {
        guard peek == byte else { return false }
        index += 1
        return true
    }

    private mutating func skipWhitespace() {
        while let byte = peek, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
    }

    /// Reads a JSON string starting at its opening quote, decoding escapes; nil on any malformation.
    private mutating func readString() -> String? {
        guard consume(UInt8(ascii: "\"")) else { return nil }
        var out: [UInt8] = []
        while let byte = peek {
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(validating: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let escaped = peek else { return nil }
                index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escaped)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = readUnicodeEscape() else { return nil }
                    out.append(contentsOf: String(Character(scalar)).utf8)
                default: return nil
                }
            case 0..<0x20:
                return nil
            default:
                out.append(byte)
            }
        }
        return nil
    }

    /// After `\u`: four hex digits, combining a surrogate pair when present; nil for lone surrogates.
    private mutating func readUnicodeEscape() -> Unicode.Scalar? {
        guard let high = readHex4() else { return nil }
        if (0xD800..<0xDC00).contains(high) {
            guard consume(UInt8(ascii: "\\")), consume(UInt8(ascii: "u")),
                  let low = readHex4(), (0xDC00..<0xE000).contains(low)
            else { return nil }
            return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
        }
        return Unicode.Scalar(high)  // nil for a lone low surrogate
    }

    private mutating func readHex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            index += 1
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// Validates and skips any JSON value.
    private mutating func skipValue(depth: Int) -> Bool {
        guard depth <= Self.maximumDepth, let byte = peek else { return false }
        switch byte {
        case UInt8(ascii: "\""):
            return readString() != nil
        case UInt8(ascii: "{"):
            index += 1
            skipWhitespace()
            if consume(UInt8(ascii: "}")) { return true }
            repeat {
                skipWhitespace()
                guard readString() != nil else { return false }
                skipWhitespace()
                guard consume(UInt8(ascii: ":")) else { return false }
                skipWhitespace()
                guard skipValue(depth: depth + 1) else { return false }
                skipWhitespace()
            } while consume(UInt8(ascii: ","))
            return consume(UInt8(ascii: "}"))
        case UInt8(ascii: "["):
            index += 1
            skipWhitespace()
            if consume(UInt8(ascii: "]")) { return true }
            repeat {
                skipWhitespace()
                guard skipValue(depth: depth + 1) else { return false }
                skipWhitespace()
            } while consume(UInt8(ascii: ","))
            return consume(UInt8(ascii: "]"))
        case UInt8(ascii: "t"): return consumeWord("true")
        case UInt8(ascii: "f"): return consumeWord("false")
        case UInt8(ascii: "n"): return consumeWord("null")
        default: return skipNumber()
        }
    }

    private mutating func consumeWord(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        let matches = word.withUTF8Buffer { expected in
            (0..<count).allSatisfy { bytes[index + $0] == expected[$0] }
        }
        if matches { index += count }
        return matches
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func skipNumber() -> Bool {
        _ = consume(UInt8(ascii: "-"))
        if consume(UInt8(ascii: "0")) {
            // no further integer digits allowed
        } else if !skipDigits() {
            return false
        }
        if consume(UInt8(ascii: ".")), !skipDigits() { return false }
        if consume(UInt8(ascii: "e")) || consume(UInt8(ascii: "E")) {
            if !consume(UInt8(ascii: "+")) { _ = consume(UInt8(ascii: "-")) }
            if !skipDigits() { return false }
        }
        return true
    }

    private mutating func skipDigits() -> Bool {
        let start = index
        while let byte = peek, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
        return index > start
    }
}
