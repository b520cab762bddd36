/// The data of a push message: string keys to string values, in a fixed order. Its size is the length of
/// its compact JSON serialisation (seed 000).
public struct DataPayload: Sendable, Equatable {
    public struct Field: Sendable, Equatable {
        public var key: String
        public var value: String
        public init(_ key: String, _ value: String) {
            self.key = key
            self.value = value
        }
    }

    /// Seed 000: the whole data payload must not be longer than this.
    public static let maximumSize = 4093
    /// Seed 000: from this size on, data is dropped (`TooBig`) or reduced to keys (`OnlyKeys`).
    public static let degradeThreshold = 4064

    /// Where the size rules degrade a payload whose limit is `maximumSize` (a Web Push message's is smaller): the
    /// seed's margin of 29 bytes below it.
    public static func degradeThreshold(forMaximum maximumSize: Int) -> Int { maximumSize - (Self.maximumSize - degradeThreshold) }

    public var fields: [Field]

    public init(_ fields: [Field]) { self.fields = fields }

    /// Length in bytes of `{"k":"v",...}`.
    public var serializedSize: Int {
        var size = 2 + max(0, fields.count - 1)
        for field in fields {
            size += JSONWriter.stringLiteralLength(field.key) + 1 + JSONWriter.stringLiteralLength(field.value)
        }
        return size
    }

    /// The compact JSON serialisation, fields in order.
    public func jsonBytes() -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(serializedSize)
        writeJSON(into: &output)
        return output
    }

    public func writeJSON(into output: inout [UInt8]) {
        output.append(UInt8(ascii: "{"))
        for (position, field) in fields.enumerated() {
            if position > 0 { output.append(UInt8(ascii: ",")) }
            JSONWriter.writeString(field.key, into: &output)
            output.append(UInt8(ascii: ":"))
            JSONWriter.writeString(field.value, into: &output)
        }
        output.append(UInt8(ascii: "}"))
    }

    public subscript(key: String) -> String? { fields.first { $0.key == key }?.value }
}

/// The v1 data payloads of seed 000, byte-exact, in the seed's key order, with its size rules.
public enum V1Payload {
    /// Builds the data payload for `content`. Returns nil only when even the smallest form of the payload is
    /// longer than `maximumSize` (seed 000: 4093 bytes; an app id and path whose escaped form alone exceeds the
    /// limit); data is degraded from 29 bytes below it on (``DataPayload/degradeThreshold(forMaximum:)``).
    public static func build(
        app: String, path: DataPath, content: NotificationContent, maximumSize: Int = DataPayload.maximumSize
    ) -> DataPayload? {
        let threshold = DataPayload.degradeThreshold(forMaximum: maximumSize)
        let sp = path.description
        let payload: DataPayload
        switch content {
        case .noData:
            payload = DataPayload([.init("t", "noData"), .init("app", app), .init("sp", sp)])
        case .revoke(let reason):
            payload = DataPayload([.init("t", "revoke"), .init("r", reason.rawValue), .init("app", app), .init("sp", sp)])
        case .value(let value):
            payload = valuePayload(app: app, sp: sp, value: value, threshold: threshold)
        case .childEvent(let changes, let keysOnly):
            payload = childEventPayload(app: app, sp: sp, changes: changes, keysOnly: keysOnly, threshold: threshold)
        case .user(let message):
            payload = userPayload(app: app, message: message, threshold: threshold)
        }
        return payload.serializedSize <= maximumSize ? payload : nil
    }

    static func valuePayload(app: String, sp: String, value: JSONValue?, threshold: Int) -> DataPayload {
        guard let value else {
            return DataPayload([.init("s", "NotLoaded"), .init("t", "value"), .init("app", app), .init("sp", sp)])
        }
        let full = DataPayload([
            .init("s", "OK"), .init("t", "value"), .init("app", app), .init("sp", sp), .init("d", JSONWriter.string(value)),
        ])
        if full.serializedSize < threshold { return full }
        return DataPayload([.init("s", "TooBig"), .init("t", "value"), .init("app", app), .init("sp", sp)])
    }

    /// A user notification: no subscription path (it is sent once per device, not per subscription); the event id
    /// `id` lets the app drop a repeat; `d` is the JSON text of the data, left out (`TooBig`) from 4064 bytes on.
    static func userPayload(app: String, message: UserMessage, threshold: Int) -> DataPayload {
        let full = DataPayload([
            .init("s", "OK"), .init("t", "user"), .init("app", app), .init("id", message.eventID),
            .init("d", JSONWriter.string(message.data)),
        ])
        if full.serializedSize < threshold { return full }
        return DataPayload([.init("s", "TooBig"), .init("t", "user"), .init("app", app), .init("id", message.eventID)])
    }

    static func childEventPayload(app: String, sp: String, changes: ChildChanges, keysOnly: Bool, threshold: Int) -> DataPayload {
        func payload(_ status: String, _ changes: ChildChanges) -> DataPayload {
            DataPayload([
                .init("s", status), .init("t", "childEvent"), .init("app", app), .init("sp", sp),
                .init("added", JSONWriter.string(.object(changes.added))),
                .init("removed", JSONWriter.string(.array(changes.removed.map { .string($0.string) }))),
                .init("changed", JSONWriter.string(.object(changes.changed))),
            ])
        }
        if !keysOnly {
            let full = payload("OK", changes)
            if full.serializedSize < threshold { return full }
        }
        let keys = payload("OnlyKeys", changes.keysOnly)
        if keys.serializedSize < threshold { return keys }
        return payload("TooBig", ChildChanges())
    }
}
