/// A write in an app's database, as published upstream (see proto/pushgateway/v1/change_event.proto),
/// validated and with its JSON parsed.
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

    /// Builds an event from the raw fields of a record, validating each. The error says what is wrong;
    /// it becomes the dead-letter reason.
    public static func validated(
        app: String, path: String, operation: String, after: String?, before: String?, eventID: String,
        timestampMs: Int64
    ) throws(ChangeEventError) -> ChangeEvent {
        guard !app.isEmpty else { throw ChangeEventError("missing app_id") }
        guard let op = Operation(rawValue: operation) else { throw ChangeEventError("unknown op '\(operation.prefix(40))'") }
        let dataPath: DataPath
        do { dataPath = try DataPath(path) } catch { throw ChangeEventError("bad path: \(error)") }
        var afterValue = JSONValue.null
        if let after, !after.isEmpty {
            do { afterValue = try JSONParser.parse(after) } catch { throw ChangeEventError("bad JSON in after: \(error)") }
        }
        var beforeValue: JSONValue?
        if let before, !before.isEmpty {
            do { beforeValue = try JSONParser.parse(before).normalized() } catch {
                throw ChangeEventError("bad JSON in before: \(error)")
            }
        }
        switch op {
        case .merge:
            guard case .object = afterValue else { throw ChangeEventError("MERGE needs an object in after") }
            for key in afterValue.children.keys {
                do { _ = try DataPath(key.string) } catch { throw ChangeEventError("bad child key in MERGE: \(error)") }
                guard !key.string.utf8.contains(UInt8(ascii: "/")) else { throw ChangeEventError("bad child key in MERGE: contains '/'") }
            }
        case .set, .snapshot:
            afterValue = afterValue.normalized()
        case .remove, .namespaceDeleted:
            afterValue = .null
        }
        return ChangeEvent(
            app: app, path: dataPath, operation: op, after: afterValue, before: beforeValue, eventID: eventID,
            timestampMs: timestampMs)
    }
}

public struct ChangeEventError: Error, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
