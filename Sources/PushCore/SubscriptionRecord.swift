/// A subscription as a record of the compacted state topic: the key is the subscription's identity, the
/// value its settings; a record without value (a tombstone) deletes it. Both are compact JSON so that an
/// operator can read the topic with kcat:
///
///     key:   ["toto","/some/path","mobile","<token>",""]        (app, path, kind, token, uid)
///     value: {"expiresAt":1767225600,"format":"v1","mode":"value"}
public struct SubscriptionRecord: Sendable, Equatable {
    public var app: String
    public var subscription: Subscription
    /// Nil: the subscription was deleted.
    public var settings: SubscriptionSettings?

    public init(app: String, subscription: Subscription, deleted: Bool = false) {
        self.app = app
        self.subscription = subscription
        self.settings = deleted ? nil : subscription.settings
    }

    public var key: [UInt8] {
        JSONWriter.bytes(
            .array([
                .string(app), .string(subscription.path.description), .string(subscription.subscriber.kind.rawValue),
                .string(subscription.subscriber.token), .string(subscription.subscriber.uid ?? ""),
            ]))
    }

    /// Nil for a tombstone.
    public var value: [UInt8]? {
        guard let settings else { return nil }
        return JSONWriter.bytes(
            .object([
                "expiresAt": .number(String(settings.expiresAt)), "format": .string(settings.format.rawValue),
                "mode": .string(settings.mode.rawValue),
            ]))
    }

    public struct DecodingError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Decodes a state record; `value` nil or empty is a deletion.
    public static func decode(key: [UInt8], value: [UInt8]?) throws(DecodingError) -> SubscriptionRecord {
        guard case .array(let parts)? = try? JSONParser.parse(key), parts.count == 5,
            let app = parts[0].stringValue, let pathText = parts[1].stringValue,
            let kind = parts[2].stringValue.flatMap(SubscriberKind.init(rawValue:)),
            let token = parts[3].stringValue, let uid = parts[4].stringValue,
            let path = try? DataPath(pathText), !app.isEmpty, !token.isEmpty
        else { throw DecodingError(description: "bad state record key") }
        let subscriber = SubscriberKey(kind: kind, token: token, uid: uid.isEmpty ? nil : uid)
        guard let value, !value.isEmpty else {
            let placeholder = SubscriptionSettings(mode: .noData, expiresAt: 0)
            return SubscriptionRecord(
                app: app, subscription: Subscription(path: path, subscriber: subscriber, settings: placeholder), deleted: true)
        }
        guard let document = try? JSONParser.parse(value),
            let expiresAt = document["expiresAt"].flatMap({ value -> Int64? in
                if case .number(let lexeme) = value { return Int64(lexeme) }
                return nil
            }),
            let mode = document["mode"]?.stringValue.flatMap(SubscriptionMode.init(rawValue:)),
            let format = document["format"]?.stringValue.flatMap(NotificationFormat.init(rawValue:))
        else { throw DecodingError(description: "bad state record value") }
        let settings = SubscriptionSettings(mode: mode, format: format, expiresAt: expiresAt)
        return SubscriptionRecord(app: app, subscription: Subscription(path: path, subscriber: subscriber, settings: settings))
    }

    /// Applies the record to an app's index: subscribe/refresh, or unsubscribe for a tombstone.
    public func apply(to index: AppIndex) {
        if let settings {
            index.subscribe(path: subscription.path, subscriber: subscription.subscriber, settings: settings)
        } else {
            index.unsubscribe(path: subscription.path, subscriber: subscription.subscriber)
        }
    }
}
