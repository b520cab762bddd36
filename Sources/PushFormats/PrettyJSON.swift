import CompactJSON

/// Indented JSON for people: two spaces per level, `"key": value`, object members in a given order (the
/// payload's own) and then sorted, strings escaped as `JSONWriter` does.
enum PrettyJSON {
    /// Member order for an object: `order` first, the rest sorted; `nested[key]` is the order inside member `key`.
    struct Order {
        var order: [ExactString] = []
        var nested: [ExactString: Order] = [:]
    }

    static func string(_ value: JSONValue, order: Order = Order()) -> String {
        var out: [UInt8] = []
        write(value, order: order, indent: 0, into: &out)
        out.append(UInt8(ascii: "\n"))
        return String(decoding: out, as: UTF8.self)
    }

    private static func newline(_ indent: Int, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\n"))
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: indent * 2))
    }

    private static func write(_ value: JSONValue, order: Order, indent: Int, into out: inout [UInt8]) {
        switch value {
        case .array(let elements) where !elements.isEmpty:
            out.append(UInt8(ascii: "["))
            for (position, element) in elements.enumerated() {
                if position > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1, into: &out)
                write(element, order: Order(), indent: indent + 1, into: &out)
            }
            newline(indent, into: &out)
            out.append(UInt8(ascii: "]"))
        case .object(let members) where !members.isEmpty:
            let first = order.order.filter { members[$0] != nil }
            let rest = JSONWriter.sortedKeys(members).filter { !order.order.contains($0) }
            out.append(UInt8(ascii: "{"))
            for (position, key) in (first + rest).enumerated() {
                guard let member = members[key] else { continue }
                if position > 0 { out.append(UInt8(ascii: ",")) }
                newline(indent + 1, into: &out)
                JSONWriter.writeString(key.string, into: &out)
                out.append(contentsOf: ": ".utf8)
                write(member, order: order.nested[key] ?? Order(), indent: indent + 1, into: &out)
            }
            newline(indent, into: &out)
            out.append(UInt8(ascii: "}"))
        default:
            JSONWriter.write(value, into: &out)
        }
    }
}
