import PushCore
import PushProto
import SwiftProtobuf

/// Turns a change record into a ``ChangeEvent``: protobuf binary by default, protobuf's JSON mapping when
/// the record's `content-type` header is `application/json`. A failure carries the dead-letter reason.
///
/// Pure (no Kafka, no I/O): the pipeline, `push-gateway validate-event` and the fuzzers share it.
public enum EventDecoder {
    public static let contentTypeHeader = "content-type"

    /// Decodes a record's value. `contentType` is the record's `content-type` header (nil when absent), `key`
    /// its key (nil when absent).
    public static func decode(value: [UInt8], contentType: [UInt8]?, key: [UInt8]?) throws(ChangeEventError) -> ChangeEvent {
        let message: Pushgateway_V1_ChangeEvent
        let contentType = contentType.map { String(decoding: $0, as: UTF8.self).lowercased() }
        do {
            if let contentType, contentType.hasPrefix("application/json") {
                message = try Pushgateway_V1_ChangeEvent(jsonUTF8Bytes: value)
            } else {
                message = try Pushgateway_V1_ChangeEvent(serializedBytes: value)
            }
        } catch {
            throw ChangeEventError("undecodable record (\(contentType ?? "protobuf")): \(error)")
        }
        let operation: String
        switch message.op {
        case .set: operation = "SET"
        case .merge: operation = "MERGE"
        case .remove: operation = "REMOVE"
        case .snapshot: operation = "SNAPSHOT"
        case .namespaceDeleted: operation = "NAMESPACE_DELETED"
        case .unspecified: throw ChangeEventError("op is missing")
        case .UNRECOGNIZED(let value): throw ChangeEventError("unknown op \(value)")
        }
        if let key, !key.isEmpty, !key.elementsEqual(message.appID.utf8) {
            let text = String(decoding: key, as: UTF8.self)
            throw ChangeEventError("record key '\(text.prefix(64))' differs from app_id '\(message.appID.prefix(64))'")
        }
        return try ChangeEvent.validated(
            app: message.appID, path: message.path, operation: operation,
            after: message.hasAfter ? message.after : nil, before: message.hasBefore ? message.before : nil,
            eventID: message.eventID, timestampMs: message.timestampMs)
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
