import PushCore

/// The data of every app as the change events published to the embedded broker describe it: what a real
/// upstream database would hold. ``EmbeddedUpstream`` answers snapshot requests from it. Pure.
struct EmbeddedDatabase {
    private var apps: [String: JSONValue] = [:]

    /// Applies a write. `SNAPSHOT` events are not writes (they copy data the database already has; applying a
    /// late one would undo the writes published after it was taken), so they change nothing.
    mutating func apply(_ event: ChangeEvent) {
        let segments = event.path.segments
        let root = apps[event.app] ?? .null
        let updated: JSONValue
        switch event.operation {
        case .set:
            updated = root.setting(event.after, at: segments)
        case .merge:
            updated = root.setting(root.value(at: segments).merging(event.after.children), at: segments)
        case .remove:
            updated = root.setting(.null, at: segments)
        case .namespaceDeleted:
            updated = .null
        case .snapshot:
            return
        }
        apps[event.app] = updated.isNull ? nil : updated
    }

    /// The value at `path` of `app` (`.null` when there is none).
    func value(app: String, at path: DataPath) -> JSONValue {
        (apps[app] ?? .null).value(at: path.segments)
    }
}
