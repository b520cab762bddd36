/// A parsed JSON document (RFC 8259), as far as the providers need to read responses and credential files.
/// Objects keep their members in document order.
enum ProviderJSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([ProviderJSON])
    case object([(key: String, value: ProviderJSON)])

    static func == (lhs: ProviderJSON, rhs: ProviderJSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    /// The value of the first member named `key` when this is an object.
    subscript(key: String) -> ProviderJSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    var numberValue: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    var arrayValue: [ProviderJSON]? {
        if case .array(let value) = self { return value }
        return nil
    }
}
