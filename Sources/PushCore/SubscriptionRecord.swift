/// A subscription as a record of the compacted state topic: the key is the subscription's identity, the
/// value its settings; a record without value (a tombstone) deletes it. Both are compact JSON so that an
/// operator can read the topic with kcat:
///
///     key:   ["toto","/some/path","mobile","<token>",""]        (app, path, kind, token, uid)
///     value: {"expiresAt":1767225600,"format":"v1","mode":"value"}     (+ "authUID" when made with a token)
///
/// A v2 subscription with filters adds them, so that a new owner applies them:
/// `"filters":{"events":["added"],"keys":["a","b"]}`.
/// A v2 subscription with a device key adds `"encryption":{"alg":"ECDH-ES+A256KW","jwk":{…}}` (the public JWK,
/// ``DeviceEncryption/json``), so that a replica taking the partition over keeps encrypting for the device.
///
/// A revoked subscription whose revoke message is still on its way is kept as a marker, `"revoked":"<reason>"`
/// in the value: it is matched by nothing, and a replica that takes the partition over sends the revoke (after
/// the subscription's pending retries); the tombstone follows once the revoke is delivered.
public struct SubscriptionRecord: Sendable, Equatable {
    public var app: String
    public var subscription: Subscription
    /// Nil: the subscription was deleted.
    public var settings: SubscriptionSettings?
    /// Set: the subscription was revoked and its revoke message is not delivered yet.
    public var revoked: RevocationReason?

    public init(app: String, subscription: Subscription, deleted: Bool = false) {
        self.app = app
        self.subscription = subscription
        self.settings = deleted ? nil : subscription.settings
    }

    /// The marker of a revoked subscription (see the type's documentation).
    public static func revocation(app: String, subscription: Subscription, reason: RevocationReason) -> SubscriptionRecord {
        var record = SubscriptionRecord(app: app, subscription: subscription)
        record.revoked = reason
        return record
    }

    /// The identity of the subscription (app, path, subscriber).
    public var identity: RetryKey { RetryKey(app: app, path: subscription.path, subscriber: subscription.subscriber) }

    /// The tombstone of the subscription of `subscriber` at `path`.
    public static func deletion(app: String, path: DataPath, subscriber: SubscriberKey) -> SubscriptionRecord {
        let subscription = Subscription(
            path: path, subscriber: subscriber, settings: SubscriptionSettings(mode: .noData, expiresAt: 0))
        return SubscriptionRecord(app: app, subscription: subscription, deleted: true)
    }

    public var key: [UInt8] {
        JSONWriter.bytes(
            .array([
                .string(app), .string(subscription.path.description), .string(subscription.subscriber.kind.rawValue),
                .string(subscription.subscriber.token), .string(subscription.subscriber.uid ?? ""),
            ]))
    }

    /// Nil for a tombstone. `authUID` is written only when the subscription was made with an auth token.
    public var value: [UInt8]? {
        guard let settings else { return nil }
        var document: [ExactString: JSONValue] = [
            "expiresAt": .number(String(settings.expiresAt)), "format": .string(settings.format.rawValue),
            "mode": .string(settings.mode.rawValue),
        ]
        if let uid = settings.authUID { document["authUID"] = .string(uid) }
        if let filters = settings.filters { document["filters"] = filters.json }
        if let encryption = settings.encryption { document["encryption"] = encryption.json }
        if let revoked { document["revoked"] = .string(revoked.rawValue) }
        return JSONWriter.bytes(.object(document))
    }

    public struct DecodingError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Decodes a state record; `value` nil or empty is a deletion.
    public static func decode(key: [UInt8], value: [UInt8]?) throws(DecodingError) -> SubscriptionRecord {
        let result = key.withUnsafeBufferPointer { key in
            withOptionalBuffer(value) { value in Result { () throws(DecodingError) in try decode(key: key, value: value) } }
        }
        return try result.get()
    }

    /// Decodes a state record from bytes it does not copy (a Kafka message's buffer); `value` nil or empty is a
    /// deletion. The records the gateway writes take a fast path (``CompactRecordScanner``); any other is read by
    /// the JSON decoder (``decodeParsingJSON(key:value:)``), which decides as it always did.
    public static func decode(key: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>?) throws(DecodingError) -> SubscriptionRecord {
        if let record = CompactRecordScanner.subscription(key: key, value: value) { return record }
        return try decodeParsingJSON(key: key, value: value)
    }

    /// Decodes a state record with the JSON decoder (every form JSON allows); `value` nil or empty is a deletion.
    public static func decodeParsingJSON(key: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>?) throws(DecodingError) -> SubscriptionRecord {
        guard case .array(let parts)? = try? JSONParser.parse(key), parts.count == 5,
            let app = parts[0].stringValue, let pathText = parts[1].stringValue,
            let kind = parts[2].stringValue.flatMap(SubscriberKind.init(rawValue:)),
            let token = parts[3].stringValue, let uid = parts[4].stringValue,
            let path = try? DataPath(pathText), !app.isEmpty, !token.isEmpty
        else { throw DecodingError(description: "bad state record key") }
        let subscriber = SubscriberKey(kind: kind, token: token, uid: uid.isEmpty ? nil : uid)
        guard let value, !value.isEmpty else { return .deletion(app: app, path: path, subscriber: subscriber) }
        guard let document = try? JSONParser.parse(value),
            let expiresAt = document["expiresAt"].flatMap({ value -> Int64? in
                if case .number(let lexeme) = value { return Int64(lexeme) }
                return nil
            }),
            let mode = document["mode"]?.stringValue.flatMap(SubscriptionMode.init(rawValue:)),
            let format = document["format"]?.stringValue.flatMap(NotificationFormat.init(rawValue:))
        else { throw DecodingError(description: "bad state record value") }
        let authUID = document["authUID"]?.stringValue
        var filters: SubscriptionFilters?
        if let stored = document["filters"] {
            do {
                filters = try SubscriptionFilters.parse(stored)
            } catch {
                throw DecodingError(description: "bad state record value: \(error.description)")
            }
        }
        var encryption: DeviceEncryption? = nil
        if let member = document["encryption"] {
            guard let decoded = DeviceEncryption.decode(member) else {
                throw DecodingError(description: "bad state record value: unreadable device key (encryption)")
            }
            encryption = decoded
        }
        let settings = SubscriptionSettings(
            mode: mode, format: format, expiresAt: expiresAt, authUID: authUID, filters: filters, encryption: encryption)
        var record = SubscriptionRecord(app: app, subscription: Subscription(path: path, subscriber: subscriber, settings: settings))
        if let reason = document["revoked"] {
            guard let parsed = reason.stringValue.flatMap(RevocationReason.init(rawValue:)) else {
                throw DecodingError(description: "bad state record value: unknown revocation reason")
            }
            record.revoked = parsed
        }
        return record
    }

    /// Applies the record to an app's index: subscribe/refresh, or unsubscribe for a tombstone or a revoked
    /// marker.
    public func apply(to index: AppIndex) {
        if let settings, revoked == nil {
            index.subscribe(path: subscription.path, subscriber: subscription.subscriber, settings: settings)
        } else {
            index.unsubscribe(path: subscription.path, subscriber: subscription.subscriber)
        }
    }
}

/// The checkpoint of a shadow (the data kept at a node with `value`/`childEvent` subscriptions), stored in
/// the state topic next to the subscriptions so that a restart does not lose it:
///
///     key:   ["shadow","toto","/some/path"]
///     value: the node's data as compact JSON
public struct ShadowRecord: Sendable, Equatable {
    public let app: String
    public let path: DataPath
    public let value: JSONValue
    /// The value as compact JSON, encoded once: the pipeline checks its size against the app's limit and
    /// writes the same bytes. A null value is the JSON text `null` (not a tombstone: a known, empty node).
    public let encodedValue: [UInt8]

    public init(app: String, path: DataPath, value: JSONValue) {
        self.app = app
        self.path = path
        self.value = value
        self.encodedValue = JSONWriter.bytes(value)
    }

    public var key: [UInt8] { JSONWriter.bytes(.array([.string("shadow"), .string(app), .string(path.description)])) }

    /// True when the node's data cannot be kept: longer than `limit` bytes, or nested deeper than the JSON
    /// parser reads back (it would be stored but lost at the next load). Either way it is `too_big`.
    public func exceeds(limit: Int) -> Bool {
        encodedValue.count > limit || value.nestingLevels > JSONParser.maximumDepth
    }
}

/// A record of the state topic: a subscription, a shadow checkpoint, or a subscription's pending retries.
public enum StateRecord: Sendable, Equatable {
    case subscription(SubscriptionRecord)
    case shadow(ShadowRecord)
    case retry(RetryRecord)

    public var app: String {
        switch self {
        case .subscription(let record): return record.app
        case .shadow(let record): return record.app
        case .retry(let record): return record.key.app
        }
    }

    public var key: [UInt8] {
        switch self {
        case .subscription(let record): return record.key
        case .shadow(let record): return record.key
        case .retry(let record): return record.recordKey
        }
    }

    /// Nil for a tombstone.
    public var value: [UInt8]? {
        switch self {
        case .subscription(let record): return record.value
        case .shadow(let record): return record.encodedValue
        case .retry(let record): return record.value
        }
    }

    private static let shadowPrefix = Array(#"["shadow","#.utf8)
    private static let retryPrefix = Array(#"["retry","#.utf8)

    public static func decode(key: [UInt8], value: [UInt8]?) throws(SubscriptionRecord.DecodingError) -> StateRecord {
        let result = key.withUnsafeBufferPointer { key in
            withOptionalBuffer(value) { value in Result { () throws(SubscriptionRecord.DecodingError) in try decode(key: key, value: value) } }
        }
        return try result.get()
    }

    /// Decodes a record from bytes it does not copy (a Kafka message's buffer, valid for the call); `value` nil or
    /// empty is a tombstone.
    public static func decode(key: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>?) throws(SubscriptionRecord.DecodingError) -> StateRecord {
        // Most records are subscriptions: the other kinds are recognised by their key's first bytes before the
        // key is parsed (an app named "shadow" or "retry" still decodes right: the part counts differ).
        if key.starts(with: shadowPrefix), case .array(let parts)? = try? JSONParser.parse(key), parts.count == 3,
            parts[0].stringValue == "shadow"
        {
            guard let app = parts[1].stringValue, let pathText = parts[2].stringValue, let path = try? DataPath(pathText),
                let value, let data = try? JSONParser.parse(value)
            else { throw SubscriptionRecord.DecodingError(description: "bad shadow record") }
            return .shadow(ShadowRecord(app: app, path: path, value: data.normalized()))
        }
        if key.starts(with: retryPrefix), let retry = try RetryRecord.decode(key: Array(key), value: value.map { Array($0) }) {
            return .retry(retry)
        }
        return .subscription(try SubscriptionRecord.decode(key: key, value: value))
    }

    public func apply(to index: AppIndex) {
        switch self {
        case .subscription(let record): record.apply(to: index)
        case .shadow(let record): index.restoreShadow(at: record.path, value: record.value)
        case .retry: break  // pending retries live in the gateway's retry queue, not in the index
        }
    }
}

/// Runs `body` over the bytes of `array`, or over nil.
func withOptionalBuffer<Result>(_ array: [UInt8]?, _ body: (UnsafeBufferPointer<UInt8>?) -> Result) -> Result {
    guard let array else { return body(nil) }
    return array.withUnsafeBufferPointer { body($0) }
}
