/// A message addressed to a user of an app, published upstream on the user-notifications topic
/// (proto/pushgateway/v1/user_notification.proto, docs/PUBLISHING.md), validated: the gateway sends it once
/// to each device of `uid` (each distinct push token of the uid's subscriptions).
public struct UserNotification: Sendable, Equatable {
    public var app: String
    public var uid: String
    /// What the devices receive (a JSON object).
    public var message: UserMessage
    public var timestampMs: Int64

    public init(app: String, uid: String, message: UserMessage, timestampMs: Int64 = 0) {
        self.app = app
        self.uid = uid
        self.message = message
        self.timestampMs = timestampMs
    }

    /// The longest `uid`, `event_id` and `collapse_key` accepted (bytes), as for identities of the API.
    public static let maximumIdentityBytes = 768
    /// The longest TTL a publisher may ask for: FCM's and HMS's maximum, 28 days.
    public static let maximumTTLSeconds: Int64 = 2_419_200

    /// Checks the fields of a decoded record; the error names the field and what was expected.
    public static func validated(
        app: String, uid: String, data: JSONValue?, collapseKey: String?, ttlSeconds: Int64?, eventID: String,
        timestampMs: Int64, appIDField: String = "app_id"
    ) throws(ChangeEventError) -> UserNotification {
        guard !app.isEmpty else { throw ChangeEventError("\(appIDField): missing; expected the app id (the record key)") }
        guard !uid.isEmpty else { throw ChangeEventError("uid: missing; expected the uid of the user to notify") }
        for (field, text) in [("uid", uid), ("event_id", eventID), ("collapse_key", collapseKey ?? "")]
        where text.utf8.count > maximumIdentityBytes {
            throw ChangeEventError("\(field): \(text.utf8.count) bytes; at most \(maximumIdentityBytes)")
        }
        guard !eventID.isEmpty else {
            throw ChangeEventError("event_id: missing; expected an id unique per message (devices use it to drop repeats)")
        }
        guard let data else { throw ChangeEventError("data: missing; expected a JSON object, such as {\"title\":\"hi\"}") }
        guard case .object = data else {
            throw ChangeEventError("data: expected a JSON object, got \(ChangeEvent.describe(data))")
        }
        if let collapseKey, collapseKey.isEmpty {
            throw ChangeEventError("collapse_key: empty; leave it out, or name the messages that replace each other")
        }
        if let ttlSeconds, ttlSeconds < 0 || ttlSeconds > maximumTTLSeconds {
            throw ChangeEventError("ttl_seconds: expected 0 to \(maximumTTLSeconds) (28 days), got \(ttlSeconds)")
        }
        return UserNotification(
            app: app, uid: uid,
            message: UserMessage(data: data, eventID: eventID, collapseKey: collapseKey, ttlSeconds: ttlSeconds.map(Int.init)),
            timestampMs: timestampMs)
    }
}

/// The content of a user notification (``NotificationContent/user(_:)``): the upstream's data, its event id, and
/// how the providers may hold it (`ttlSeconds`) or replace it (`collapseKey`).
public struct UserMessage: Sendable, Equatable {
    /// A JSON object.
    public var data: JSONValue
    public var eventID: String
    public var collapseKey: String?
    public var ttlSeconds: Int?

    public init(data: JSONValue, eventID: String, collapseKey: String? = nil, ttlSeconds: Int? = nil) {
        self.data = data
        self.eventID = eventID
        self.collapseKey = collapseKey
        self.ttlSeconds = ttlSeconds
    }
}
