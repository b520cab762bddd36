/// A write in an app's database, as published upstream (see proto/pushgateway/v1/change_event.proto and
/// docs/PUBLISHING.md), validated and with its JSON parsed.
public struct ChangeEvent: Sendable, Equatable {
    public enum Operation: String, Sendable, CaseIterable {
        /// Replace the node at `path` with `after`.
        case set = "SET"
        /// `after` is an object of children to set; a null child removes it.
        case merge = "MERGE"
        /// Remove the node at `path`.
        case remove = "REMOVE"
        /// The current value of a node (seeds shadows; notifies nobody).
        case snapshot = "SNAPSHOT"
        /// The app's database was deleted.
        case namespaceDeleted = "NAMESPACE_DELETED"

        /// The op named in any case (`set`, `Set`, `SET`).
        public init?(name: some StringProtocol) {
            self.init(rawValue: name.uppercased())
        }

        /// The op of a protobuf enum number (`SET = 1` … `NAMESPACE_DELETED = 5`); nil for 0 (unspecified) and
        /// unknown numbers.
        public init?(number: Int) {
            switch number {
            case 1: self = .set
            case 2: self = .merge
            case 3: self = .remove
            case 4: self = .snapshot
            case 5: self = .namespaceDeleted
            default: return nil
            }
        }

        /// What a reason says is expected of `op`.
        public static let expected = "SET, MERGE, REMOVE, SNAPSHOT or NAMESPACE_DELETED"
    }

    public var app: String
    public var path: DataPath
    public var operation: Operation
    /// The complete new value at `path` (normalised). For `merge`, an object of children.
    public var after: JSONValue
    /// The old value at `path` when the publisher sent it.
    public var before: JSONValue?
    public var eventID: String
    public var timestampMs: Int64

    public init(
        app: String, path: DataPath, operation: Operation, after: JSONValue = .null, before: JSONValue? = nil,
        eventID: String = "", timestampMs: Int64 = 0
    ) {
        self.app = app
        self.path = path
        self.operation = operation
        self.after = after
        self.before = before
        self.eventID = eventID
        self.timestampMs = timestampMs
    }

    /// Builds an event from decoded fields, validating each. `after` and `before` are JSON values (nil when
    /// absent); `appIDField` is how the publisher's encoding names the app id (`app_id` in protobuf, `appId` in
    /// the JSON mapping). The error names the field and what was expected; it becomes the dead-letter reason.
    public static func validated(
        app: String, path: String, operation: Operation, after: JSONValue?, before: JSONValue?, eventID: String,
        timestampMs: Int64, appIDField: String = "app_id"
    ) throws(ChangeEventError) -> ChangeEvent {
        guard !app.isEmpty else {
            throw ChangeEventError("\(appIDField): missing; expected the app id (the same as the record key)")
        }
        let dataPath: DataPath
        do { dataPath = try DataPath(path) } catch {
            throw ChangeEventError(
                "path: expected a \"/\"-separated path such as /chat/m1 (\"/\" is the root), got \(quoted(path)): \(error)")
        }
        var afterValue = after ?? .null
        switch operation {
        case .merge:
            guard case .object(let members) = afterValue else {
                throw ChangeEventError("after: MERGE expects an object of the children to set, got \(describe(afterValue))")
            }
            for exactKey in members.keys {
                let key = exactKey.string
                guard !key.isEmpty else { throw ChangeEventError("after: MERGE expects child keys, got an empty key") }
                guard !key.utf8.contains(UInt8(ascii: "/")) else {
                    throw ChangeEventError("after: MERGE expects child keys, got \(quoted(key)), which contains '/'")
                }
                do { _ = try DataPath(key) } catch {
                    throw ChangeEventError("after: MERGE expects valid child keys, got \(quoted(key)): \(error)")
                }
            }
        case .set, .snapshot:
            afterValue = afterValue.normalized()
        case .remove, .namespaceDeleted:
            afterValue = .null
        }
        return ChangeEvent(
            app: app, path: dataPath, operation: operation, after: afterValue, before: before?.normalized(),
            eventID: eventID, timestampMs: timestampMs)
    }

    /// Builds an event from the raw text fields of a record (`operation` in any case, `after`/`before` as JSON
    /// text, empty or nil when absent).
    public static func validated(
        app: String, path: String, operation: String, after: String?, before: String?, eventID: String,
        timestampMs: Int64
    ) throws(ChangeEventError) -> ChangeEvent {
        guard let op = Operation(name: operation) else {
            throw ChangeEventError("op: expected \(Operation.expected), got \(quoted(operation))")
        }
        return try validated(
            app: app, path: path, operation: op, after: try jsonText(after, field: "after"),
            before: try jsonText(before, field: "before"), eventID: eventID, timestampMs: timestampMs)
    }

    /// Parses a field that holds JSON text (`after`, `before`); nil or empty text is an absent field.
    public static func jsonText(_ text: String?, field: String) throws(ChangeEventError) -> JSONValue? {
        guard let text, !text.isEmpty else { return nil }
        do { return try JSONParser.parse(text) } catch {
            throw ChangeEventError(
                "\(field): expected JSON text (such as {\"m\":\"hi\"}, 42 or \"\\\"hi\\\"\"), got \(quoted(text)): \(error)")
        }
    }

    /// A publisher's text in a reason: a JSON string literal, cut at 64 characters.
    public static func quoted(_ text: some StringProtocol) -> String {
        let cut = text.count > 64 ? String(text.prefix(64)) + "…" : String(text)
        var bytes: [UInt8] = []
        JSONWriter.writeString(cut, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What kind of JSON value a publisher sent, for reasons: "a string", "an array", …
    public static func describe(_ value: JSONValue) -> String {
        switch value {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number(let lexeme): return "the number \(lexeme.prefix(32))"
        case .string(let text): return "the string \(quoted(text))"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

public struct ChangeEventError: Error, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
