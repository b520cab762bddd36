/// The kinds of child change a `childEvent` subscription can ask to be woken for.
public struct ChildEventKinds: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let added = ChildEventKinds(rawValue: 1)
    public static let changed = ChildEventKinds(rawValue: 2)
    public static let removed = ChildEventKinds(rawValue: 4)
    public static let all: ChildEventKinds = [.added, .changed, .removed]

    /// The API's name of each kind, in the order documents list them.
    public static let names: [(name: String, kind: ChildEventKinds)] = [("added", .added), ("changed", .changed), ("removed", .removed)]

    /// The names of the kinds in the set, in document order.
    public var names: [String] { Self.names.filter { contains($0.kind) }.map(\.name) }
}

/// What narrows the writes that wake a subscription (issue 20): which direct children of the subscribed node
/// matter (`keys`), and, in `childEvent` mode, which kinds of change (`events`). Nil members do not narrow.
///
/// A filtered subscription fires only for a write that changed a listed child in a listed way; its
/// `childEvent` content keeps only those changes. `value` and `noData` content is never narrowed. Filters
/// are settings, not identity: they do not change the subscription id. docs/PAYLOADS.md, "Filters".
public struct SubscriptionFilters: Sendable, Hashable {
    public static let maximumKeys = 32
    public static let maximumKeyUTF8Length = 256

    /// Child keys of the subscribed node, sorted by bytes, distinct, never empty. Nil: every child.
    public let keys: [ExactString]?
    /// Never empty. Nil: every kind. Only in `childEvent` mode.
    public let events: ChildEventKinds?

    /// Validates: at most ``maximumKeys`` distinct keys, each a valid path key (non-empty, no `/`, `.`, `$`,
    /// `#`, `[`, `]` or control character) of at most ``maximumKeyUTF8Length`` bytes; `events` not empty.
    public init(keys: [String]? = nil, events: ChildEventKinds? = nil) throws(FilterError) {
        if let keys {
            guard !keys.isEmpty else { throw .emptyKeys }
            guard keys.count <= Self.maximumKeys else { throw .tooManyKeys(keys.count) }
            var checked: [ExactString] = []
            checked.reserveCapacity(keys.count)
            for key in keys {
                guard key.utf8.count <= Self.maximumKeyUTF8Length else { throw .keyTooLong(String(key.prefix(64))) }
                guard !key.utf8.contains(UInt8(ascii: "/")), let path = try? DataPath(key), path.segments.count == 1 else {
                    throw .invalidKey(String(key.prefix(64)))
                }
                checked.append(ExactString(key))
            }
            checked.sort()
            for index in checked.indices.dropFirst() where checked[index] == checked[index - 1] {
                throw .duplicateKey(String(checked[index].string.prefix(64)))
            }
            self.keys = checked
        } else {
            self.keys = nil
        }
        if let events, events.isEmpty { throw .emptyEvents }
        self.events = events.map { $0.intersection(.all) }
    }

    /// No narrowing at all (`"filters": {}`): stored as no filters.
    public var isEmpty: Bool { keys == nil && events == nil }

    /// Checks the filters against the subscription's mode: `events` only in `childEvent` mode.
    public func check(mode: SubscriptionMode) throws(FilterError) {
        if events != nil && mode != .childEvent { throw .eventsNeedChildEvent(mode) }
    }

    /// True when `key` is a child these filters let through.
    public func lists(_ key: ExactString) -> Bool {
        guard let keys else { return true }
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle] == key { return true }
            if keys[middle] < key { low = middle + 1 } else { high = middle }
        }
        return false
    }

    /// Whether a write that touched `touch` passes: a listed child changed in a listed way. When the kind of a
    /// change is not known (`keysOnly`), any kind counts; when other children may have been removed unseen
    /// (`complete` false), it passes if a listed child could be one of them and `removed` is listed.
    public func admits(_ touch: ChildTouch) -> Bool {
        let kinds = events ?? .all
        if kinds.contains(.added), touch.changes.added.keys.contains(where: lists) { return true }
        if touch.keysOnly || kinds.contains(.changed), touch.changes.changed.keys.contains(where: lists) { return true }
        if kinds.contains(.removed), touch.changes.removed.contains(where: lists) { return true }
        guard !touch.complete, kinds.contains(.removed) else { return false }
        guard let keys else { return true }
        return keys.contains { touch.changes.added[$0] == nil && touch.changes.changed[$0] == nil }
    }

    /// The changes a filtered `childEvent` subscriber is shown: listed children, listed kinds (changes whose
    /// kind is unknown, `keysOnly`, are kept whatever the kind).
    public func narrowed(_ changes: ChildChanges, keysOnly: Bool) -> ChildChanges {
        let kinds = events ?? .all
        return ChildChanges(
            added: kinds.contains(.added) ? changes.added.filter { lists($0.key) } : [:],
            removed: kinds.contains(.removed) ? changes.removed.filter(lists) : [],
            changed: keysOnly || kinds.contains(.changed) ? changes.changed.filter { lists($0.key) } : [:])
    }

    /// The filters as the API and the state topic write them: `{"events":[...],"keys":[...]}`, members absent
    /// when nil, events in the order added, changed, removed.
    public var json: JSONValue {
        var members: [ExactString: JSONValue] = [:]
        if let keys { members["keys"] = .array(keys.map { .string($0.string) }) }
        if let events { members["events"] = .array(events.names.map { .string($0) }) }
        return .object(members)
    }

    /// Reads filters written as ``json`` (or sent by a client): unknown members, wrong types and bad values
    /// are errors. `{}` gives empty filters (``isEmpty``).
    public static func parse(_ value: JSONValue) throws(FilterError) -> SubscriptionFilters {
        guard case .object(let members) = value else { throw .notAnObject }
        for name in members.keys where name != "keys" && name != "events" {
            throw .unknownMember(String(name.string.prefix(64)))
        }
        var keys: [String]?
        if let listed = members["keys"], listed != .null {
            guard case .array(let elements) = listed else { throw .keysNotStrings }
            keys = []
            for element in elements {
                guard let key = element.stringValue else { throw .keysNotStrings }
                keys?.append(key)
            }
        }
        var events: ChildEventKinds?
        if let listed = members["events"], listed != .null {
            guard case .array(let elements) = listed else { throw .unknownEvent("") }
            var kinds: ChildEventKinds = []
            for element in elements {
                guard let name = element.stringValue, let kind = ChildEventKinds.names.first(where: { $0.name == name })?.kind else {
                    throw .unknownEvent(element.stringValue.map { String($0.prefix(64)) } ?? "")
                }
                guard !kinds.contains(kind) else { throw .duplicateEvent(name) }
                kinds.insert(kind)
            }
            events = kinds
        }
        return try SubscriptionFilters(keys: keys, events: events)
    }
}

/// The children of a subscribed node a write touched, as far as the gateway knows: what `childEvent` shows,
/// and what filters are checked against.
public struct ChildTouch: Sendable, Equatable {
    public var changes: ChildChanges
    /// True when the old value at the node is unknown: `changed` names children the write touched, whatever
    /// the kind (added, changed or removed); `removed` names children a `MERGE` removed.
    public var keysOnly: Bool
    /// False when children not named may have been removed too (a SET or REMOVE at or above the node whose
    /// old value the gateway does not know).
    public var complete: Bool

    public init(changes: ChildChanges, keysOnly: Bool = false, complete: Bool = true) {
        self.changes = changes
        self.keysOnly = keysOnly
        self.complete = complete
    }
}

/// Why filters were refused (400 at subscribe time).
public enum FilterError: Error, Equatable, CustomStringConvertible {
    case notAnObject
    case unknownMember(String)
    case emptyKeys
    case tooManyKeys(Int)
    case keysNotStrings
    case keyTooLong(String)
    case invalidKey(String)
    case duplicateKey(String)
    case emptyEvents
    case unknownEvent(String)
    case duplicateEvent(String)
    case eventsNeedChildEvent(SubscriptionMode)

    public var description: String {
        switch self {
        case .notAnObject: return "'filters' must be an object: {\"keys\": [...], \"events\": [...]}"
        case .unknownMember(let name): return "'filters' has an unknown member '\(name)': use keys and events"
        case .emptyKeys: return "'filters.keys' must not be empty (leave it out to be woken for every child)"
        case .tooManyKeys(let count):
            return "'filters.keys' lists \(count) keys: at most \(SubscriptionFilters.maximumKeys)"
        case .keysNotStrings: return "'filters.keys' must be an array of strings"
        case .keyTooLong(let key):
            return "'filters.keys' key '\(key)' is longer than \(SubscriptionFilters.maximumKeyUTF8Length) bytes"
        case .invalidKey(let key):
            return "'filters.keys' key '\(key)' is not a child key (empty, or holds / . $ # [ ] or a control character)"
        case .duplicateKey(let key): return "'filters.keys' lists '\(key)' twice"
        case .emptyEvents: return "'filters.events' must not be empty (leave it out to be woken for every kind)"
        case .unknownEvent(let name):
            return "'filters.events' holds '\(name)': use an array of added, changed, removed"
        case .duplicateEvent(let name): return "'filters.events' lists '\(name)' twice"
        case .eventsNeedChildEvent(let mode):
            return "'filters.events' applies to childEvent mode only, not \(mode.rawValue): leave it out"
        }
    }
}
