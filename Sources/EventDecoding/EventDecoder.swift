import PushCore
import PushProto
import SwiftProtobuf

/// Turns a change record into a ``ChangeEvent``: protobuf binary by default, the JSON form
/// (``JSONEventReader``) when the record's `content-type` header is `application/json`. A failure carries the
/// dead-letter reason: it names the field and what was expected (docs/PUBLISHING.md lists them). Reasons of
/// records that cannot be decoded at all start with `undecodable record` (the metrics' `undecodable`
/// category); the others are `invalid`.
///
/// Pure (no Kafka, no I/O): the pipeline, `push-gateway validate-event` and the fuzzers share it.
public enum EventDecoder {
    public static let contentTypeHeader = "content-type"
    public static let jsonContentType = "application/json"

    /// Decodes a record's value. `contentType` is the record's `content-type` header (nil when absent), `key`
    /// its key (nil when absent).
    public static func decode(value: [UInt8], contentType: [UInt8]?, key: [UInt8]?) throws(ChangeEventError) -> ChangeEvent {
        let contentType = contentType.map { String(decoding: $0, as: UTF8.self).lowercased() }
        if let contentType, contentType.hasPrefix(jsonContentType) {
            return try JSONEventReader.read(value, key: key)
        }
        let message = try decodeProtobuf(
            Pushgateway_V1_ChangeEvent.self, value: value, contentType: contentType, name: "pushgateway.v1.ChangeEvent",
            file: "change_event.proto", noun: "event")
        let operation: ChangeEvent.Operation
        switch message.op {
        case .unspecified:
            throw ChangeEventError("op: missing (OP_UNSPECIFIED); expected \(ChangeEvent.Operation.expected)")
        case .UNRECOGNIZED(let number):
            throw ChangeEventError(
                "op: expected SET (1), MERGE (2), REMOVE (3), SNAPSHOT (4) or NAMESPACE_DELETED (5), got the number \(number)")
        default:
            guard let known = ChangeEvent.Operation(number: message.op.rawValue) else {
                throw ChangeEventError("op: expected \(ChangeEvent.Operation.expected), got the number \(message.op.rawValue)")
            }
            operation = known
        }
        if let key, !key.isEmpty, !message.appID.isEmpty, !key.elementsEqual(message.appID.utf8) {
            throw ChangeEventError(keyMismatch(key: key, app: message.appID, field: "app_id"))
        }
        return try ChangeEvent.validated(
            app: message.appID, path: message.path, operation: operation,
            after: try ChangeEvent.jsonText(message.hasAfter ? message.after : nil, field: "after"),
            before: try ChangeEvent.jsonText(message.hasBefore ? message.before : nil, field: "before"),
            eventID: message.eventID, timestampMs: message.timestampMs)
    }

    /// The protobuf binary form of a record (no `content-type: application/json` header): an empty value, a JSON
    /// value without the header, and bytes that do not decode as `M` are `undecodable record` errors naming the
    /// message (`name`, in proto/pushgateway/v1/`file`) and what to send instead. `noun` names the record in them.
    static func decodeProtobuf<M: SwiftProtobuf.Message>(
        _ type: M.Type, value: [UInt8], contentType: String?, name: String, file: String, noun: String
    ) throws(ChangeEventError) -> M {
        let format = contentType.map { "protobuf, content-type \(ChangeEvent.quoted($0))" } ?? "protobuf"
        guard !value.isEmpty else {
            throw ChangeEventError(
                "undecodable record (\(format)): the value is empty; expected a \(name) (protobuf, or JSON with content-type: application/json)"
            )
        }
        let notJSON = ChangeEventError(
            "undecodable record (\(format)): the value is JSON but "
                + (contentType.map { "its content-type is \(ChangeEvent.quoted($0))" } ?? "the record has no content-type header")
                + "; a JSON \(noun) needs the record header content-type: application/json (without it the value is read as protobuf)")
        // Neither message ever starts with 0x7B (it would be field 15, a group).
        if value.first == UInt8(ascii: "{") { throw notJSON }
        do {
            return try M(serializedBytes: value)
        } catch {
            if looksLikeJSON(value) { throw notJSON }
            throw ChangeEventError(
                "undecodable record (\(format)): expected a protobuf \(name) (proto/pushgateway/v1/\(file)), got bytes that do not decode (\(error))"
            )
        }
    }

    static func keyMismatch(key: [UInt8], app: String, field: String) -> String {
        let text = String(decoding: key, as: UTF8.self)
        return "record key: expected the app id \(ChangeEvent.quoted(app)) (the event's \(field)), got \(ChangeEvent.quoted(text))"
    }

    /// True when the value starts (after blanks) with `{`: a JSON object (asked only when protobuf failed:
    /// a protobuf value may start with 0x0A, a newline).
    public static func looksLikeJSON(_ value: [UInt8]) -> Bool {
        value.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } == UInt8(ascii: "{")
    }

    /// Encodes an event as the canonical protobuf record value (used by `push-gateway publish` and tests).
    public static func encode(
        app: String, path: String, operation: Pushgateway_V1_Op, after: String?, before: String?, eventID: String,
        timestampMs: Int64, json: Bool
    ) throws -> [UInt8] {
        var message = Pushgateway_V1_ChangeEvent()
        message.appID = app
        message.path = path
        message.op = operation
        if let after { message.after = after }
        if let before { message.before = before }
        message.eventID = eventID
        message.timestampMs = timestampMs
        return json ? try message.jsonUTF8Bytes() : try message.serializedBytes()
    }
}
