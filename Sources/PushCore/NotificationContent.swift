/// The children of a node that were added, removed and changed by a write.
public struct ChildChanges: Sendable, Equatable {
    public var added: [ExactString: JSONValue]
    public var removed: [ExactString]
    public var changed: [ExactString: JSONValue]

    public init(added: [ExactString: JSONValue] = [:], removed: [ExactString] = [], changed: [ExactString: JSONValue] = [:]) {
        self.added = added
        self.removed = removed.sorted()
        self.changed = changed
    }

    /// The differences between the old and the new value of a node, child by child.
    public static func between(old: JSONValue, new: JSONValue) -> ChildChanges {
        let before = old.children
        let after = new.children
        var added: [ExactString: JSONValue] = [:]
        var changed: [ExactString: JSONValue] = [:]
        var removed: [ExactString] = []
        for (key, value) in after {
            if let previous = before[key] {
                if previous != value { changed[key] = value }
            } else {
                added[key] = value
            }
        }
        for key in before.keys where after[key] == nil { removed.append(key) }
        return ChildChanges(added: added, removed: removed, changed: changed)
    }

    /// The same changes with every added and changed value replaced by `true` (status `OnlyKeys`).
    public var keysOnly: ChildChanges {
        ChildChanges(
            added: added.mapValues { _ in .bool(true) }, removed: removed,
            changed: changed.mapValues { _ in .bool(true) })
    }

    public var isEmpty: Bool { added.isEmpty && removed.isEmpty && changed.isEmpty }
}

/// What a notification says, before it is put in a payload format (v1 or v2).
public enum NotificationContent: Sendable, Equatable {
    /// `noData` mode: just wake up.
    case noData
    /// `value` mode: the complete new value at the subscribed path, or nil when the gateway does not hold
    /// it yet (status `NotLoaded`).
    case value(JSONValue?)
    /// `childEvent` mode. `keysOnly` means the values are not known (status `OnlyKeys`, values `true`).
    case childEvent(ChildChanges, keysOnly: Bool)
    /// The subscription was revoked.
    case revoke(RevocationReason)
    /// A message addressed to the subscriber's user (the user-notifications topic), sent once per device: v1
    /// `{"s":S,"t":"user","app":A,"id":EVENT_ID,"d":"<JSON text>"}`, v2 event `t` = `u` (docs/PAYLOADS.md).
    case user(UserMessage)
}
