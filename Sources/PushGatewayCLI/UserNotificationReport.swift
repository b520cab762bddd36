import EventDecoding
import Providers
import PushCore

/// What `push-gateway validate-event --user-notification` prints about a record of the user-notifications topic the
/// gateway accepts: what it will do with it, the message as the gateway reads it, and how to publish it.
struct UserNotificationReport {
    var notification: UserNotification
    var record: RecordForm

    var text: String {
        let message = notification.message
        var lines = [
            "accepted: a message to the user \(notification.uid) of app \(notification.app)",
            "  sent once to each device of the user (docs/PAYLOADS.md, \"Notifications addressed to a user\")",
        ]
        if let ttl = message.ttlSeconds {
            lines.append("  TTL \(ttl) s: FCM android.ttl and apns-expiration, HMS android.ttl (at most 15 days); a retry carries what is left")
        }
        if let key = message.collapseKey {
            let hms = HMSMessageEncoder.hmsCollapseKey(key).map { "HMS android.collapse_key \($0)" }
                ?? "not sent to HMS (it takes only the integers -1 to 100)"
            lines.append("  collapse key \(ChangeEvent.quoted(key)): FCM android.collapse_key and apns-collapse-id; \(hms)")
        }
        lines.append("as the gateway reads it:")
        var members: [ExactString: JSONValue] = [
            "appId": .string(notification.app), "uid": .string(notification.uid), "data": message.data,
            "eventId": .string(message.eventID),
        ]
        if let key = message.collapseKey { members["collapseKey"] = .string(key) }
        if let ttl = message.ttlSeconds { members["ttlSeconds"] = .number(String(ttl)) }
        if notification.timestampMs != 0 { members["timestampMs"] = .number(String(notification.timestampMs)) }
        lines.append("  " + JSONWriter.string(.object(members)))
        lines += record.publishing(app: notification.app)
        lines.append("  topic: the user-notifications topic (kafka.userNotificationsTopic, push.notifications by default)")
        var notes = record.keyNotes
        if notification.timestampMs == 0 {
            notes.append("timestampMs is missing: set the time of publication in milliseconds since the epoch (the latency metric uses it)")
        }
        return RecordForm.text(lines, notes: notes)
    }
}
