/// The pending notifications of one subscription, as a record of the compacted state topic (so they survive a
/// crash or a rebalance and are co-partitioned with the app's events). The key names the subscription; the
/// value is its whole line of pending notifications, oldest first; a tombstone means none is pending.
///
///     key:   ["retry","toto","/some/path","mobile","<token>",""]        (app, path, kind, token, uid)
///     value: [{"attempt":2,"content":{"t":"value","v":{"a":1}},"first":1767225600.5,"format":"v1",
///              "notBefore":1767225604.1,"origin":"<event id>","scope":"toto"}]
///     (+ "encryption":{"alg":…,"jwk":{…}} for a subscription with a device key)
public struct RetryRecord: Sendable, Equatable {
    public var key: RetryKey
    /// Empty: nothing pending (written as a tombstone).
    public var entries: [PendingNotification]

    public init(key: RetryKey, entries: [PendingNotification]) {
        self.key = key
        self.entries = entries
    }

    public var recordKey: [UInt8] {
        JSONWriter.bytes(
            .array([
                .string("retry"), .string(key.app), .string(key.path.description), .string(key.subscriber.kind.rawValue),
                .string(key.subscriber.token), .string(key.subscriber.uid ?? ""),
            ]))
    }

    /// Nil for a tombstone.
    public var value: [UInt8]? {
        guard !entries.isEmpty else { return nil }
        return JSONWriter.bytes(.array(entries.map(Self.encode)))
    }

    static func encode(_ entry: PendingNotification) -> JSONValue {
        var members: [ExactString: JSONValue] = [
            "attempt": .number(String(entry.attempt)), "content": encode(entry.content),
            "first": .number(String(entry.firstFailureAt)), "format": .string(entry.format.rawValue),
            "notBefore": .number(String(entry.notBefore)), "origin": .string(entry.origin), "scope": .string(entry.scope),
        ]
        if let encryption = entry.encryption { members["encryption"] = encryption.json }
        return .object(members)
    }

    static func encode(_ content: NotificationContent) -> JSONValue {
        switch content {
        case .noData:
            return .object(["t": .string("noData")])
        case .value(let value):
            return .object(["t": .string("value"), "v": value ?? .null, "loaded": .bool(value != nil)])
        case .childEvent(let changes, let keysOnly):
            return .object([
                "t": .string("childEvent"), "a": .object(changes.added), "r": .array(changes.removed.map { .string($0.string) }),
                "c": .object(changes.changed), "keysOnly": .bool(keysOnly),
            ])
        case .revoke(let reason):
            return .object(["t": .string("revoke"), "r": .string(reason.rawValue)])
        case .user(let message):
            var members: [ExactString: JSONValue] = ["t": .string("user"), "d": message.data, "e": .string(message.eventID)]
            if let collapseKey = message.collapseKey { members["k"] = .string(collapseKey) }
            if let ttl = message.ttlSeconds { members["ttl"] = .number(String(ttl)) }
            return .object(members)
        }
    }

    static func decodeContent(_ value: JSONValue?) -> NotificationContent? {
        guard let value, let type = value["t"]?.stringValue else { return nil }
        switch type {
        case "noData":
            return .noData
        case "value":
            guard value["loaded"] == .bool(true) else { return .value(nil) }
            return .value(value["v"] ?? .null)
        case "childEvent":
            guard case .object(let added)? = value["a"], case .array(let removed)? = value["r"],
                case .object(let changed)? = value["c"]
            else { return nil }
            let changes = ChildChanges(added: added, removed: removed.compactMap { $0.stringValue.map { ExactString($0) } }, changed: changed)
            return .childEvent(changes, keysOnly: value["keysOnly"] == .bool(true))
        case "revoke":
            return value["r"]?.stringValue.flatMap(RevocationReason.init(rawValue:)).map { .revoke($0) }
        case "user":
            guard case .object? = value["d"], let eventID = value["e"]?.stringValue else { return nil }
            var ttl: Int?
            if let member = value["ttl"] {
                guard case .number(let lexeme) = member, let seconds = Int(lexeme) else { return nil }
                ttl = seconds
            }
            return .user(UserMessage(data: value["d"] ?? .null, eventID: eventID, collapseKey: value["k"]?.stringValue, ttlSeconds: ttl))
        default:
            return nil
        }
    }

    /// Attempts beyond this are not credible (2 hours of retries from 1 s is about a dozen): refused at load.
    public static let maximumAttempt = 1_000_000

    /// Decodes a retry record; nil when `key` is not a retry key. Throws when it is one but is malformed.
    public static func decode(key: [UInt8], value: [UInt8]?) throws(SubscriptionRecord.DecodingError) -> RetryRecord? {
        guard case .array(let parts)? = try? JSONParser.parse(key), parts.count == 6, parts[0].stringValue == "retry" else {
            return nil
        }
        guard let app = parts[1].stringValue, let pathText = parts[2].stringValue, let path = try? DataPath(pathText),
            let kind = parts[3].stringValue.flatMap(SubscriberKind.init(rawValue:)), let token = parts[4].stringValue,
            let uid = parts[5].stringValue
        else { throw SubscriptionRecord.DecodingError(description: "bad retry record key") }
        let subscriber = SubscriberKey(kind: kind, token: token, uid: uid.isEmpty ? nil : uid)
        let retryKey = RetryKey(app: app, path: path, subscriber: subscriber)
        guard let value, !value.isEmpty else { return RetryRecord(key: retryKey, entries: []) }
        guard case .array(let items)? = try? JSONParser.parse(value) else {
            throw SubscriptionRecord.DecodingError(description: "bad retry record value")
        }
        var entries: [PendingNotification] = []
        for item in items {
            // Every number is checked before use: a record anyone with write access to the state topic wrote
            // must never crash a replica at load (`Int(_:)` traps on an out-of-range Double).
            guard let content = decodeContent(item["content"]),
                let format = item["format"]?.stringValue.flatMap(NotificationFormat.init(rawValue:)),
                let first = item["first"]?.doubleValue, first.isFinite,
                let notBefore = item["notBefore"]?.doubleValue, notBefore.isFinite,
                let attemptNumber = item["attempt"]?.doubleValue, let attempt = Int(exactly: attemptNumber),
                (0...Self.maximumAttempt).contains(attempt)
            else { throw SubscriptionRecord.DecodingError(description: "bad retry record entry") }
            var encryption: DeviceEncryption? = nil
            if let member = item["encryption"] {
                guard let decoded = DeviceEncryption.decode(member) else {
                    throw SubscriptionRecord.DecodingError(description: "bad retry record entry: unreadable device key (encryption)")
                }
                encryption = decoded
            }
            entries.append(
                PendingNotification(
                    app: app, path: path, subscriber: subscriber, format: format, encryption: encryption, content: content,
                    scope: item["scope"]?.stringValue ?? app, origin: item["origin"]?.stringValue ?? "",
                    firstFailureAt: first, attempt: attempt, notBefore: notBefore))
        }
        return RetryRecord(key: retryKey, entries: entries)
    }
}
