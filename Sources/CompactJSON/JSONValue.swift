/// A JSON value (RFC 8259).
///
/// Numbers keep the text the document wrote (no float round-trips), objects are unordered maps whose
/// serialisation (``JSONWriter``) sorts keys by their UTF-8 bytes.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's JSON lexeme, validated by the parser.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The member named `key` when this is an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members[key]
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

    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }
}
