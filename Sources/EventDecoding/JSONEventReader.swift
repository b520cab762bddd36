import PushCore

/// Reads the JSON form of a change event (`content-type: application/json`): protobuf's JSON mapping of
/// `pushgateway.v1.ChangeEvent`, made writable by hand (docs/PUBLISHING.md):
/// - field names in lowerCamelCase (`appId`) or as in the `.proto` file (`app_id`);
/// - `op` as its name in any case (`"set"`) or its enum number;
/// - `after` and `before` as any JSON value (`{"m":"hi"}`, `[1,2]`, `42`), or as a string holding JSON text
///   (`"{\"m\":\"hi\"}"`, the strict protobuf mapping); a string is always read as JSON text;
/// - `timestampMs` as a number or a decimal string (int64 in protobuf's mapping).
///
/// Decoded with ``JSONParser`` (not SwiftProtobuf) so that each mistake gets a reason naming the field and
/// what was expected, and so `after` keeps its number lexemes byte for byte.
enum JSONEventReader {
    /// The fields a publisher may send, by their lowerCamelCase name, with their `.proto` spelling.
    static let fields: [(json: String, proto: String)] = [
        ("appId", "app_id"), ("path", "path"), ("op", "op"), ("after", "after"), ("before", "before"),
        ("eventId", "event_id"), ("timestampMs", "timestamp_ms"),
    ]

    static func read(_ value: [UInt8], key: [UInt8]?) throws(ChangeEventError) -> ChangeEvent {
        let document: JSONValue
        do { document = try JSONParser.parse(value) } catch {
            throw ChangeEventError(
                "undecodable record (application/json): expected a JSON object (the JSON form of pushgateway.v1.ChangeEvent), got \(error)")
        }
        guard case .object(let members) = document else {
            throw ChangeEventError(
                "undecodable record (application/json): expected a JSON object (the JSON form of pushgateway.v1.ChangeEvent), got \(ChangeEvent.describe(document))"
            )
        }
        var byField: [String: (name: String, value: JSONValue)] = [:]
        for exactName in members.keys.sorted() {
            let name = exactName.string
            guard let field = fields.first(where: { $0.json.bytesEqual(name) || $0.proto.bytesEqual(name) }) else {
                throw ChangeEventError(unknownField(name))
            }
            if let earlier = byField[field.json] {
                throw ChangeEventError("\(name): given twice (also as \(earlier.name)); send one of them")
            }
            byField[field.json] = (name, members[exactName] ?? .null)
        }
        func member(_ name: String) -> (name: String, value: JSONValue)? {
            // null is an absent field, as in protobuf's JSON mapping.
            guard let entry = byField[name], !entry.value.isNull else { return nil }
            return entry
        }

        let app = try string(member("appId"), default: "")
        let appIDField = byField["appId"]?.name ?? "appId"
        guard let path = member("path") else {
            throw ChangeEventError("path: missing; expected the path of the write, such as \"/chat/m1\" (\"/\" is the root)")
        }
        let pathText = try string(path, default: "")
        let operation = try op(member("op"))
        let after = try jsonValue(member("after"))
        let before = try jsonValue(member("before"))
        let eventID = try string(member("eventId"), default: "")
        let timestampMs = try timestamp(member("timestampMs"))
        if let key, !key.isEmpty, !key.elementsEqual(app.utf8), !app.isEmpty {
            throw ChangeEventError(EventDecoder.keyMismatch(key: key, app: app, field: appIDField))
        }
        return try ChangeEvent.validated(
            app: app, path: pathText, operation: operation, after: after, before: before, eventID: eventID,
            timestampMs: timestampMs, appIDField: appIDField)
    }

    static func unknownField(_ name: String) -> String {
        let expected = fields.map(\.json).joined(separator: ", ")
        let squashed = name.lowercased().filter { $0 != "_" && $0 != "-" }
        if let near = fields.first(where: { $0.json.lowercased() == squashed }) {
            return "\(ChangeEvent.quoted(name)): unknown field; did you mean \(near.json)? (expected \(expected))"
        }
        return "\(ChangeEvent.quoted(name)): unknown field; expected \(expected)"
    }

    private static func string(_ entry: (name: String, value: JSONValue)?, default: String) throws(ChangeEventError) -> String {
        guard let entry else { return `default` }
        guard case .string(let text) = entry.value else {
            throw ChangeEventError("\(entry.name): expected a string, got \(ChangeEvent.describe(entry.value))")
        }
        return text
    }

    private static func op(_ entry: (name: String, value: JSONValue)?) throws(ChangeEventError) -> ChangeEvent.Operation {
        guard let entry else { throw ChangeEventError("op: missing; expected \(ChangeEvent.Operation.expected)") }
        switch entry.value {
        case .string(let name):
            if let op = ChangeEvent.Operation(name: name) { return op }
            throw ChangeEventError("op: expected \(ChangeEvent.Operation.expected) (in any case), got \(ChangeEvent.quoted(name))")
        case .number(let lexeme):
            if let number = Int(lexeme), let op = ChangeEvent.Operation(number: number) { return op }
            throw ChangeEventError(
                "op: expected \(ChangeEvent.Operation.expected) (or their numbers 1 to 5), got the number \(lexeme.prefix(32))")
        default:
            throw ChangeEventError("op: expected \(ChangeEvent.Operation.expected), got \(ChangeEvent.describe(entry.value))")
        }
    }

    /// A JSON value, or a string holding JSON text.
    private static func jsonValue(_ entry: (name: String, value: JSONValue)?) throws(ChangeEventError) -> JSONValue? {
        guard let entry else { return nil }
        guard case .string(let text) = entry.value else { return entry.value }
        if text.isEmpty { return nil }
        do { return try JSONParser.parse(text) } catch {
            // The string value itself, as the publisher must write it: JSON text inside a JSON string.
            let asText = ChangeEvent.quoted(JSONWriter.string(.string(String(text.prefix(24)))))
            throw ChangeEventError(
                "\(entry.name): expected a JSON value or JSON text, got the string \(ChangeEvent.quoted(text)), which is not JSON text (\(error)); a string is read as JSON text, so a string value is written \"\(entry.name)\":\(asText)"
            )
        }
    }

    private static func timestamp(_ entry: (name: String, value: JSONValue)?) throws(ChangeEventError) -> Int64 {
        guard let entry else { return 0 }
        let lexeme: String
        switch entry.value {
        case .number(let text): lexeme = text
        case .string(let text): lexeme = text
        default: lexeme = ""
        }
        guard let value = Int64(lexeme) else {
            throw ChangeEventError(
                "\(entry.name): expected milliseconds since the epoch as an integer (such as 1700000000000), got \(ChangeEvent.describe(entry.value))"
            )
        }
        return value
    }
}
