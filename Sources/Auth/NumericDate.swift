import CompactJSON

/// A JWT NumericDate (RFC 7519 §2): seconds since the epoch, a JSON number that may have a fraction.
/// Kept as its whole-second floor and ceiling, computed exactly from the JSON lexeme when it has no
/// exponent. Values beyond ±2^53 seconds are refused.
struct NumericDate: Equatable {
    static let limit: Int64 = 1 << 53

    let floor: Int64
    let ceiling: Int64

    init?(_ value: JSONValue) {
        guard case .number(let lexeme) = value else { return nil }
        self.init(lexeme: lexeme)
    }

    init?(lexeme: String) {
        let utf8 = Array(lexeme.utf8)
        if utf8.contains(where: { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            guard let value = Double(lexeme), value.isFinite, abs(value) <= Double(Self.limit) else { return nil }
            let down = value.rounded(.down), up = value.rounded(.up)
            floor = Int64(down)
            ceiling = Int64(up)
            return
        }
        // -?digits(.digits)? as validated by the JSON parser.
        var index = 0
        let negative = utf8.first == UInt8(ascii: "-")
        if negative { index = 1 }
        var whole: Int64 = 0
        var sawDigit = false
        while index < utf8.count, utf8[index] != UInt8(ascii: ".") {
            let byte = utf8[index]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            whole = whole * 10 + Int64(byte - UInt8(ascii: "0"))
            guard whole <= Self.limit else { return nil }
            sawDigit = true
            index += 1
        }
        guard sawDigit else { return nil }
        var hasFraction = false
        if index < utf8.count {
            index += 1  // "."
            guard index < utf8.count else { return nil }
            while index < utf8.count {
                let byte = utf8[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                if byte != UInt8(ascii: "0") { hasFraction = true }
                index += 1
            }
        }
        if negative {
            floor = hasFraction ? -whole - 1 : -whole
            ceiling = -whole
        } else {
            floor = whole
            ceiling = hasFraction ? whole + 1 : whole
        }
    }
}
