import PushCore
import PushProto
import SwiftProtobuf

/// Turns a record of the user-notifications topic into a validated ``PushCore/UserNotification``. The JSON form
/// (record header `content-type: application/json`) of `pushgateway.v1.UserNotification`
/// (proto/pushgateway/v1/user_notification.proto), read as change events are (``JSONEventReader``): field names in
/// lowerCamelCase or as in the `.proto` file; `data` as a JSON object or as a string holding its JSON text (the
/// strict protobuf mapping); `ttlSeconds` and `timestampMs` as numbers or decimal strings. A failure carries the
/// dead-letter reason, naming the field and what was expected.
///
/// Without that header the value is read as protobuf binary (as change records are): `data` holds the JSON text of
/// the object; `collapse_key` and `ttl_seconds` are proto3 `optional` (absent: none; present, even empty or 0:
/// checked as given).
public enum UserNotificationDecoder {
    static let fields: [(json: String, proto: String)] = [
        ("appId", "app_id"), ("uid", "uid"), ("data", "data"), ("collapseKey", "collapse_key"), ("ttlSeconds", "ttl_seconds"),
        ("eventId", "event_id"), ("timestampMs", "timestamp_ms"),
    ]

    public static func decode(value: [UInt8], contentType: [UInt8]?, key: [UInt8]?) throws(ChangeEventError) -> UserNotification {
        let contentType = contentType.map { String(decoding: $0, as: UTF8.self).lowercased() }
        guard let contentType, contentType.hasPrefix(EventDecoder.jsonContentType) else {
            return try decodeProtobuf(value: value, contentType: contentType, key: key)
        }
        let document: JSONValue
        do { document = try JSONParser.parse(value) } catch {
            throw ChangeEventError(
                "undecodable record (application/json): expected a JSON object (the JSON form of pushgateway.v1.UserNotification), got \(error)")
        }
        guard case .object(let members) = document else {
            throw ChangeEventError(
                "undecodable record (application/json): expected a JSON object (the JSON form of pushgateway.v1.UserNotification), got \(ChangeEvent.describe(document))"
            )
        }
        var byField: [String: (name: String, value: JSONValue)] = [:]
        for exactName in members.keys.sorted() {
            let name = exactName.string
            guard let field = fields.first(where: { $0.json.bytesEqual(name) || $0.proto.bytesEqual(name) }) else {
                throw ChangeEventError("\(ChangeEvent.quoted(name)): unknown field; expected \(fields.map(\.json).joined(separator: ", "))")
            }
            if let earlier = byField[field.json] {
                throw ChangeEventError("\(name): given twice (also as \(earlier.name)); send one of them")
            }
            byField[field.json] = (name, members[exactName] ?? .null)
        }
        func member(_ name: String) -> (name: String, value: JSONValue)? {
            guard let entry = byField[name], !entry.value.isNull else { return nil }
            return entry
        }
        let app = try string(member("appId"))
        let appIDField = byField["appId"]?.name ?? "appId"
        if let key, !key.isEmpty, let app, !key.elementsEqual(app.utf8) {
            throw ChangeEventError(EventDecoder.keyMismatch(key: key, app: app, field: appIDField))
        }
        return try UserNotification.validated(
            app: app ?? "", uid: try string(member("uid")) ?? "", data: try data(member("data")),
            collapseKey: try string(member("collapseKey")), ttlSeconds: try integer(member("ttlSeconds")),
            eventID: try string(member("eventId")) ?? "", timestampMs: try integer(member("timestampMs")) ?? 0,
            appIDField: appIDField)
    }

    /// Encodes a user notification as a record value: protobuf binary, or protobuf's JSON mapping when `json`
    /// (`data` is JSON text; used by `push-gateway publish-user-notification` and tests). Not checked: decode it.
    public static func encode(
        app: String, uid: String, data: String, collapseKey: String?, ttlSeconds: Int64?, eventID: String,
        timestampMs: Int64, json: Bool
    ) throws -> [UInt8] {
        var message = Pushgateway_V1_UserNotification()
        message.appID = app
        message.uid = uid
        message.data = data
        if let collapseKey { message.collapseKey = collapseKey }
        if let ttlSeconds { message.ttlSeconds = ttlSeconds }
        message.eventID = eventID
        message.timestampMs = timestampMs
        return json ? try message.jsonUTF8Bytes() : try message.serializedBytes()
    }

    /// The protobuf binary form (see the type's documentation).
    private static func decodeProtobuf(value: [UInt8], contentType: String?, key: [UInt8]?) throws(ChangeEventError) -> UserNotification {
        let message = try EventDecoder.decodeProtobuf(
            Pushgateway_V1_UserNotification.self, value: value, contentType: contentType,
            name: "pushgateway.v1.UserNotification", file: "user_notification.proto", noun: "user notification")
        if let key, !key.isEmpty, !message.appID.isEmpty, !key.elementsEqual(message.appID.utf8) {
            throw ChangeEventError(EventDecoder.keyMismatch(key: key, app: message.appID, field: "app_id"))
        }
        return try UserNotification.validated(
            app: message.appID, uid: message.uid,
            data: try data(message.data.isEmpty ? nil : ("data", .string(message.data))),
            collapseKey: message.hasCollapseKey ? message.collapseKey : nil,
            ttlSeconds: message.hasTtlSeconds ? message.ttlSeconds : nil,
            eventID: message.eventID, timestampMs: message.timestampMs)
    }

    private static func string(_ entry: (name: String, value: JSONValue)?) throws(ChangeEventError) -> String? {
        guard let entry else { return nil }
        guard case .string(let text) = entry.value else {
            throw ChangeEventError("\(entry.name): expected a string, got \(ChangeEvent.describe(entry.value))")
        }
        return text
    }

    /// A JSON value, or a string holding its JSON text.
    private static func data(_ entry: (name: String, value: JSONValue)?) throws(ChangeEventError) -> JSONValue? {
        guard let entry else { return nil }
        guard case .string(let text) = entry.value else { return entry.value }
        do { return try JSONParser.parse(text) } catch {
            throw ChangeEventError(
                "\(entry.name): expected a JSON object or its JSON text, got the string \(ChangeEvent.quoted(text)), which is not JSON text (\(error))")
        }
    }

    private static func integer(_ entry: (name: String, value: JSONValue)?) throws(ChangeEventError) -> Int64? {
        guard let entry else { return nil }
        let lexeme: String
        switch entry.value {
        case .number(let text): lexeme = text
        case .string(let text): lexeme = text
        default: lexeme = ""
        }
        guard let value = Int64(lexeme) else {
            throw ChangeEventError("\(entry.name): expected an integer, got \(ChangeEvent.describe(entry.value))")
        }
        return value
    }
}
