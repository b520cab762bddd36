/// The event JSON that a v2 data payload carries (inside its compact JOSE `evt`), byte-exact.
///
/// Keys in this fixed order, absent ones left out: `t`, `m`, `a`, `v`, `c`, `r`, `s`, `p`, `id`, `e`.
///
/// | content | event |
/// | --- | --- |
/// | noData | `{"t":"v","m":"noData","a":A,"p":P,"id":ID}` |
/// | value | `{"t":"v","m":"value","a":A,"v":VALUE,"s":S,"p":P,"id":ID}` (`v` left out for `NotLoaded`, `TooBig`) |
/// | childEvent | `{"t":"v","m":"childEvent","a":A,"c":{"a":{…},"r":[…],"c":{…}},"s":S,"p":P,"id":ID}` |
/// | revoke | `{"t":"r","a":A,"r":REASON,"p":P,"id":ID}` |
/// | user | `{"t":"u","a":A,"v":DATA,"s":S,"e":EVENT_ID}` (no `p`, `id`: sent once per device, not per subscription; `v` left out for `TooBig`) |
///
/// Values are JSON (not JSON text in a string), written by `JSONWriter`: compact, object keys sorted.
public enum V2Event {
    /// How far the data is cut down to fit the size limit.
    public enum Degrade: Sendable, CaseIterable, Comparable {
        /// Everything (status `OK`, or `NotLoaded` / `OnlyKeys` when the content says so).
        case full
        /// childEvent only: added and changed values replaced by `true` (status `OnlyKeys`).
        case onlyKeys
        /// No data: value without `v`, childEvent with empty `c` (status `TooBig`).
        case tooBig
    }

    /// The forms worth trying for `content`, largest first: `build` picks the first one that fits.
    public static func forms(for content: NotificationContent) -> [Degrade] {
        switch content {
        case .noData, .revoke, .value(nil): [.full]
        case .value, .user: [.full, .tooBig]
        case .childEvent(_, let keysOnly): keysOnly ? [.onlyKeys, .tooBig] : [.full, .onlyKeys, .tooBig]
        }
    }

    /// The status `s` the event carries for `content` at `degrade`, nil for noData and revoke.
    public static func status(for content: NotificationContent, degrade: Degrade) -> String? {
        switch content {
        case .noData, .revoke: nil
        case .value(nil): "NotLoaded"
        case .value, .user: degrade == .full ? "OK" : "TooBig"
        case .childEvent(_, let keysOnly):
            switch degrade {
            case .full: keysOnly ? "OnlyKeys" : "OK"
            case .onlyKeys: "OnlyKeys"
            case .tooBig: "TooBig"
            }
        }
    }

    /// The compact event JSON for `content` at `degrade` (ignored where it does not apply: noData, revoke,
    /// a value not loaded).
    public static func bytes(
        app: String, path: DataPath, subscriptionID: String, content: NotificationContent, degrade: Degrade = .full
    ) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(96 + app.utf8.count + path.utf8Length + subscriptionID.utf8.count)
        write(app: app, path: path, subscriptionID: subscriptionID, content: content, degrade: degrade, into: &out)
        return out
    }

    public static func write(
        app: String, path: DataPath, subscriptionID: String, content: NotificationContent, degrade: Degrade,
        into out: inout [UInt8]
    ) {
        // `t` comes first, so every key written through here follows another member.
        func key(_ name: StaticString) {
            out.append(contentsOf: ",\"".utf8)
            name.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(contentsOf: "\":".utf8)
        }
        func string(_ name: StaticString, _ value: String) {
            key(name)
            JSONWriter.writeString(value, into: &out)
        }

        if case .revoke = content {
            out.append(contentsOf: #"{"t":"r""#.utf8)
        } else if case .user = content {
            out.append(contentsOf: #"{"t":"u""#.utf8)
        } else {
            out.append(contentsOf: #"{"t":"v""#.utf8)
        }
        switch content {
        case .noData: string("m", SubscriptionMode.noData.rawValue)
        case .value: string("m", SubscriptionMode.value.rawValue)
        case .childEvent: string("m", SubscriptionMode.childEvent.rawValue)
        case .revoke, .user: break
        }
        string("a", app)
        switch content {
        case .value(let value?) where degrade == .full:
            key("v")
            JSONWriter.write(value, into: &out)
        case .user(let message) where degrade == .full:
            key("v")
            JSONWriter.write(message.data, into: &out)
        case .childEvent(let changes, let keysOnly):
            key("c")
            let shown: ChildChanges
            switch degrade {
            case .full: shown = keysOnly ? changes.keysOnly : changes
            case .onlyKeys: shown = changes.keysOnly
            case .tooBig: shown = ChildChanges()
            }
            out.append(contentsOf: #"{"a":"#.utf8)
            JSONWriter.write(.object(shown.added), into: &out)
            out.append(contentsOf: #","r":"#.utf8)
            JSONWriter.write(.array(shown.removed.map { .string($0.string) }), into: &out)
            out.append(contentsOf: #","c":"#.utf8)
            JSONWriter.write(.object(shown.changed), into: &out)
            out.append(UInt8(ascii: "}"))
        case .revoke(let reason):
            string("r", reason.rawValue)
        default: break
        }
        if let status = status(for: content, degrade: degrade) { string("s", status) }
        if case .user(let message) = content {
            string("e", message.eventID)
        } else {
            string("p", path.description)
            string("id", subscriptionID)
        }
        out.append(UInt8(ascii: "}"))
    }
}
