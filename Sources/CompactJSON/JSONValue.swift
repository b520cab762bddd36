/// A JSON value (RFC 8259).
///
/// Numbers keep the text the document wrote (no float round-trips), objects are unordered maps whose
/// serialisation (``JSONWriter``) sorts keys by their UTF-8 bytes. Member names, strings and number lexemes
/// are compared by their bytes (``ExactString``), never by Unicode canonical equivalence.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's JSON lexeme, validated by the parser.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([ExactString: JSONValue])

    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The member named `key` when this is an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members[ExactString(key)]
    }

    public static func == (left: JSONValue, right: JSONValue) -> Bool {
        switch (left, right) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a.bytesEqual(b)
        case (.string(let a), .string(let b)): return a.bytesEqual(b)
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var doubleValue: Double? {
        if case .number(let lexeme) = self { return Double(lexeme) }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    public var objectValue: [ExactString: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }
}

extension JSONValue {
    /// Levels of nesting: 1 for a scalar or an empty container, 1 + the deepest member's otherwise. A value
    /// parses back only when this is at most ``JSONParser/maximumDepth``.
    public var nestingLevels: Int {
        switch self {
        case .array(let elements): return 1 + (elements.lazy.map(\.nestingLevels).max() ?? 0)
        case .object(let members): return 1 + (members.values.lazy.map(\.nestingLevels).max() ?? 0)
        default: return 1
        }
    }
}
