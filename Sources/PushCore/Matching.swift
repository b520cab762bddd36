/// A notification to send to one or more subscribers of the same node and mode.
public struct MatchedNotification: Sendable, Equatable {
    /// The subscription path (`sp`).
    public var path: DataPath
    public var mode: SubscriptionMode
    public var content: NotificationContent
    public var recipients: [Recipient]

    public init(path: DataPath, mode: SubscriptionMode, content: NotificationContent, recipients: [Recipient]) {
        self.path = path
        self.mode = mode
        self.content = content
        self.recipients = recipients
    }
}

/// One subscriber to deliver to, with the format it asked for and its device key when it gave one.
public struct Recipient: Sendable, Hashable {
    public var subscriber: SubscriberKey
    public var format: NotificationFormat
    public var encryption: DeviceEncryption?

    public init(subscriber: SubscriberKey, format: NotificationFormat, encryption: DeviceEncryption? = nil) {
        self.subscriber = subscriber
        self.format = format
        self.encryption = encryption
    }

    /// The recipient of `settings`' subscription.
    public init(subscriber: SubscriberKey, settings: SubscriptionSettings) {
        self.init(subscriber: subscriber, format: settings.format, encryption: settings.encryption)
    }
}

extension AppIndex {
    /// Applies a change event: returns the notifications it causes and updates the shadows.
    ///
    /// A subscription at S fires for a write at S, below S, or above S when the value at S changed
    /// (SPEC §3), and, when it has filters, only when the write passes them (``SubscriptionFilters``).
    /// Shadows are updated from every overlapping event whatever the filters: other subscriptions at the node
    /// and later writes depend on them. Subscriptions expired at `now` are skipped. `SNAPSHOT` only seeds shadows.
    /// `NAMESPACE_DELETED` removes every subscription and returns their revocations.
    public func apply(_ event: ChangeEvent, now: Int64) -> [MatchedNotification] {
        changedShadows = []
        if event.operation == .namespaceDeleted {
            return revocations(of: removeAll(), reason: .namespaceDoesNotExist)
        }
        let before = byteCount
        defer { report(since: before) }
        var output: [MatchedNotification] = []
        // Shadows seeded on the way: their nodes change class, so they are replaced once the walk is over.
        var seeds: [PendingSeed] = []
        defer { if !seeds.isEmpty { seed(seeds) } }
        let write = event.path.segments
        let notify = event.operation != .snapshot
        var parent: Node?
        var node = root
        var depth = 0
        while true {
            if depth < write.count {
                if let payload = node.payload {
                    applyAbove(payload, parent: parent, depth: depth, event: event, notify: notify, now: now, seeds: &seeds, into: &output)
                }
                guard let next = node.children[write[depth]] else { return output }
                parent = node
                node = next
                depth += 1
            } else {
                if let payload = node.payload {
                    applyAt(payload, parent: parent, event: event, notify: notify, now: now, seeds: &seeds, into: &output)
                }
                node.children.forEach { child in
                    applyBelow(child, parent: node, relative: [child.key], event: event, notify: notify, now: now, seeds: &seeds, into: &output)
                }
                return output
            }
        }
    }

    /// Revocation notifications for removed subscriptions, grouped by node.
    public func revocations(of subscriptions: [Subscription], reason: RevocationReason) -> [MatchedNotification] {
        var grouped: [DataPath: [Recipient]] = [:]
        for subscription in subscriptions {
            grouped[subscription.path, default: []].append(
                Recipient(subscriber: subscription.subscriber, settings: subscription.settings))
        }
        return grouped.map { path, recipients in
            MatchedNotification(path: path, mode: .noData, content: .revoke(reason), recipients: recipients)
        }.sorted { $0.path.description < $1.path.description }
    }

    // MARK: - The three positions of a subscription relative to a write

    /// The write is below this node (S is a strict prefix of the write path).
    private func applyAbove(
        _ node: Payload, parent: Node?, depth: Int, event: ChangeEvent, notify: Bool, now: Int64, seeds: inout [PendingSeed],
        into output: inout [MatchedNotification]
    ) {
        let relative = event.path.segments[depth...]
        let old = node.storedShadow
        var new: JSONValue?
        if let old, node.dataSubscribers > 0 {
            switch event.operation {
            case .set, .snapshot, .remove:
                new = old.setting(event.after, at: relative)
            case .merge:
                new = old.setting(old.value(at: relative).merging(event.after.children), at: relative)
            case .namespaceDeleted:
                new = nil
            }
            storeShadow(new, of: node, parent: parent, seeds: &seeds)
            if let new, new != old {
                changedShadows.append((DataPath(validatedSegments: Array(event.path.segments[..<depth])), new))
            }
        }
        guard notify else { return }
        let childKey = event.path.segments[depth]
        // Only the child on the write's path can change: the touch is complete even when the value is unknown.
        emit(node, path: DataPath(validatedSegments: Array(event.path.segments[..<depth])), value: new, now: now, into: &output) {
            if let old, let new { return ChildTouch(changes: .between(old: old, new: new)) }
            return ChildTouch(changes: ChildChanges(changed: [childKey: .bool(true)]), keysOnly: true)
        }
    }

    /// The write is at this node.
    private func applyAt(
        _ node: Payload, parent: Node?, event: ChangeEvent, notify: Bool, now: Int64, seeds: inout [PendingSeed],
        into output: inout [MatchedNotification]
    ) {
        let shadow = node.storedShadow
        let old = shadow ?? event.before
        var new: JSONValue?
        switch event.operation {
        case .set, .snapshot, .remove: new = event.after
        case .merge: new = old?.merging(event.after.children)
        case .namespaceDeleted: new = nil
        }
        if node.dataSubscribers > 0, let new, new != shadow {
            storeShadow(new, of: node, parent: parent, seeds: &seeds)
            changedShadows.append((event.path, new))
        }
        guard notify else { return }
        emit(node, path: event.path, value: new, now: now, into: &output) {
            if let old, let new { return ChildTouch(changes: .between(old: old, new: new)) }
            // A MERGE names every child it touches; a SET or REMOVE may have removed children nobody named.
            return ChildTouch(changes: Self.unknownChanges(event), keysOnly: true, complete: event.operation == .merge)
        }
    }

    /// The write is above this node; `relative` is this node's path below the write.
    private func applyBelow(
        _ node: Node, parent: Node, relative: [ExactString], event: ChangeEvent, notify: Bool, now: Int64,
        seeds: inout [PendingSeed], into output: inout [MatchedNotification]
    ) {
        let new: JSONValue
        switch event.operation {
        case .set, .snapshot, .remove:
            new = event.after.value(at: relative)
        case .merge:
            // Children the MERGE does not name are untouched: nothing below them changes.
            guard let first = relative.first, let member = event.after.children[first] else { return }
            new = member.normalized().value(at: relative.dropFirst())
        case .namespaceDeleted:
            return
        }
        if let payload = node.payload {
            let shadow = payload.storedShadow
            let old = shadow ?? event.before?.value(at: relative)
            if payload.dataSubscribers > 0, shadow != new {
                storeShadow(new, of: payload, parent: parent, seeds: &seeds)
                changedShadows.append((DataPath(validatedSegments: event.path.segments + relative), new))
            }
            if notify && old != new {
                let path = DataPath(validatedSegments: event.path.segments + relative)
                emit(node, path: path, value: new, now: now, into: &output) {
                    if let old { return ChildTouch(changes: .between(old: old, new: new)) }
                    return ChildTouch(changes: ChildChanges(changed: new.children), keysOnly: true, complete: false)
                }
            }
        }
        node.children.forEach { child in
            applyBelow(
                child, parent: node, relative: relative + [child.key], event: event, notify: notify, now: now, seeds: &seeds,
                into: &output)
        }
    }

    /// Child keys a write at S touched when S's old value is unknown: all in `changed` (they may be new).
    private static func unknownChanges(_ event: ChangeEvent) -> ChildChanges {
        switch event.operation {
        case .merge:
            var changed: [ExactString: JSONValue] = [:]
            var removed: [ExactString] = []
            for (key, value) in event.after.children {
                if value.normalized().isNull { removed.append(key) } else { changed[key] = .bool(true) }
            }
            return ChildChanges(removed: removed, changed: changed)
        default:
            return ChildChanges(changed: event.after.children)
        }
    }

    /// Groups a node's live subscribers by mode and appends one notification per mode, plus one per distinct
    /// filters of filtered `childEvent` subscribers (their content is narrowed). A filtered subscriber the
    /// write does not pass (``SubscriptionFilters/admits(_:)``) gets nothing. `value` is the new value at the
    /// node (nil: unknown); `touch` what the write did to its children, computed once, when first needed.
    private func emit(
        _ node: Node, path: DataPath, value: JSONValue?, now: Int64, into output: inout [MatchedNotification],
        touch makeTouch: () -> ChildTouch
    ) {
        var byMode: [SubscriptionMode: [Recipient]] = [:]
        var filtered: [(filters: SubscriptionFilters, recipients: [Recipient])] = []
        var computed: ChildTouch?
        func touch() -> ChildTouch {
            if let computed { return computed }
            let made = makeTouch()
            computed = made
            return made
        }
        node.payload?.subscribers.forEach { subscriber, settings in
            guard settings.expiresAt > now else { return }
            let recipient = Recipient(subscriber: subscriber, settings: settings)
            if let filters = settings.filters {
                guard filters.admits(touch()) else { return }
                if settings.mode == .childEvent {
                    if let group = filtered.firstIndex(where: { $0.filters == filters }) {
                        filtered[group].recipients.append(recipient)
                    } else {
                        filtered.append((filters, [recipient]))
                    }
                    return
                }
            }
            byMode[settings.mode, default: []].append(recipient)
        }
        for mode in SubscriptionMode.allCases {
            guard let recipients = byMode[mode] else { continue }
            let content: NotificationContent
            switch mode {
            case .noData: content = .noData
            case .value: content = .value(value)
            case .childEvent:
                let touched = touch()
                content = .childEvent(touched.changes, keysOnly: touched.keysOnly)
            }
            output.append(MatchedNotification(path: path, mode: mode, content: content, recipients: recipients))
        }
        for group in filtered {
            let touched = touch()
            let changes = group.filters.narrowed(touched.changes, keysOnly: touched.keysOnly)
            output.append(
                MatchedNotification(
                    path: path, mode: .childEvent, content: .childEvent(changes, keysOnly: touched.keysOnly),
                    recipients: group.recipients))
        }
    }
}
