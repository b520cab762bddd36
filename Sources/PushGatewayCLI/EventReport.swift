import EventDecoding
import PushCore

/// What `push-gateway validate-event` prints about an event the gateway accepts: what it will do with it, the
/// event as the gateway reads it, and how to publish it.
struct EventReport {
    var event: ChangeEvent
    var record: RecordForm

    var text: String {
        var lines = ["accepted: \(event.operation.rawValue) at \(event.path) of app \(event.app)", "  \(effect)"]
        lines.append("  (an app the gateway has no settings for is skipped, counted in pushgateway_events_consumed_total{result=\"unknown_app\"})")
        lines.append("as the gateway reads it:")
        lines.append("  " + JSONWriter.string(canonical))
        lines += record.publishing(app: event.app)
        var notes = record.keyNotes
        if event.eventID.isEmpty { notes.append("eventId is empty: set a unique id per write (tracing, duplicate counting)") }
        if event.timestampMs == 0 {
            notes.append("timestampMs is missing: set the time of the write in milliseconds since the epoch (the latency metric uses it)")
        }
        return RecordForm.text(lines, notes: notes)
    }

    private var effect: String {
        let path = event.path.description
        switch event.operation {
        case .set where event.after.isNull:
            return "removes the node \(path) (after is null or absent) and notifies the subscriptions at, below and above it"
        case .set:
            return "replaces the node \(path) with \(shown(event.after)) and notifies the subscriptions at \(path), below it (when their value changed) and above it"
        case .merge:
            let children = event.after.children
            let set = children.filter { !$0.value.isNull }.keys.sorted().map(\.string)
            let removed = children.filter { $0.value.isNull }.keys.sorted().map(\.string)
            var parts: [String] = []
            if !set.isEmpty { parts.append("sets the children \(set.joined(separator: ", "))") }
            if !removed.isEmpty { parts.append("removes the children \(removed.joined(separator: ", "))") }
            return "\(parts.joined(separator: " and ")) of \(path) and notifies the subscriptions at, below and above it"
        case .remove:
            return "removes the node \(path) and notifies the subscriptions at, below and above it"
        case .snapshot:
            return "seeds the gateway's copy of the data at and below \(path) with \(shown(event.after)); notifies nobody"
        case .namespaceDeleted:
            return "revokes every subscription of app \(event.app) (reason namespace_does_not_exist)"
        }
    }

    private func shown(_ value: JSONValue) -> String {
        let text = JSONWriter.string(value)
        let bytes = text.utf8.count
        return (bytes > 200 ? String(text.prefix(200)) + "…" : text) + " (\(bytes) bytes)"
    }

    private var canonical: JSONValue {
        var members: [ExactString: JSONValue] = [
            "appId": .string(event.app), "path": .string(event.path.description), "op": .string(event.operation.rawValue),
        ]
        if event.operation != .remove && event.operation != .namespaceDeleted { members["after"] = event.after }
        if let before = event.before { members["before"] = before }
        if !event.eventID.isEmpty { members["eventId"] = .string(event.eventID) }
        if event.timestampMs != 0 { members["timestampMs"] = .number(String(event.timestampMs)) }
        return .object(members)
    }
}

/// How the record will be published, as the publisher said (`--key`, `--content-type`) or as guessed: what both
/// reports (``EventReport``, ``UserNotificationReport``) say about its key and header.
struct RecordForm {
    /// The record key the publisher will set (nil: not said, so the report asks for the app id).
    var key: [UInt8]?
    var keyGiven: Bool
    /// The record's `content-type` header (nil: none).
    var contentType: String?
    /// True when the content type was guessed from the input rather than given.
    var contentTypeGuessed: Bool

    /// How to publish a record of `app`: its key and header.
    func publishing(app: String) -> [String] {
        var lines = ["publish it with:", "  record key: \(app)"]
        if let contentType {
            lines.append("  header content-type: \(contentType)" + (contentTypeGuessed ? " (JSON form: required)" : ""))
        } else {
            lines.append("  no content-type header (protobuf)")
        }
        return lines
    }

    /// The note about a record published without a key.
    var keyNotes: [String] {
        guard keyGiven, key?.isEmpty ?? true else { return [] }
        return [
            "the record has no key: it is delivered, but the gateway logs an error; the key must be the app id, so that an app's events share one partition and stay in order"
        ]
    }

    /// A report's lines, then its notes, if any, as one text.
    static func text(_ lines: [String], notes: [String]) -> String {
        (lines + (notes.isEmpty ? [] : ["notes:"] + notes.map { "  - \($0)" })).joined(separator: "\n") + "\n"
    }
}
