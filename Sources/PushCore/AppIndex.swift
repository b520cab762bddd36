/// The subscriptions of one app, indexed by path in a trie, with the shadow (in-memory copy of the data)
/// of every node that has a `value` or `childEvent` subscription.
///
/// Matching an event walks the write's path from the root (subscriptions at or above the write) and the
/// subtree below the write (subscriptions below it); nothing else is visited, so the cost does not depend
/// on subscriptions off the write's path.
///
/// Not thread-safe: the owner serialises access (one lock per app).
public final class AppIndex {
    /// A trie node. Kept small (about 64 bytes): most nodes only lead to others; what a node with
    /// subscribers needs lives in its ``Payload``.
    final class Node {
        var children = CompactMap<String, Node>()
        /// Nil while nobody is subscribed here.
        var payload: Payload?
        /// Subscribers in this node's subtree, itself included.
        var subtreeCount: Int32 = 0

        var subscriberCount: Int { payload?.subscribers.count ?? 0 }
        var dataSubscriberCount: Int32 { payload?.dataSubscriberCount ?? 0 }
        var shadow: JSONValue? {
            get { payload?.shadow }
            set { payload?.shadow = newValue }
        }
    }

    final class Payload {
        var subscribers = CompactMap<SubscriberKey, SubscriptionSettings>()
        /// Subscribers here that need data (`value`, `childEvent`).
        var dataSubscriberCount: Int32 = 0
        /// The data at this node when known; nil until seeded. Kept only while `dataSubscriberCount > 0`.
        var shadow: JSONValue?
    }

    /// A v2 subscription's place in the trie, for the per-user index.
    struct UserEntry: Hashable {
        var path: DataPath
        var subscriber: SubscriberKey
    }

    public let app: String
    let root = Node()
    public private(set) var subscriptionCount = 0
    /// The subscriptions of each v2 user (subscribers with a uid), for the v2 API's list/get by id.
    private var byUser: [String: Set<UserEntry>] = [:]
    /// The shadows the last ``apply(_:now:)`` changed, to be checkpointed with the subscriptions.
    public internal(set) var changedShadows: [(path: DataPath, value: JSONValue)] = []

    public init(app: String) { self.app = app }

    // MARK: Subscriptions

    public enum SubscribeOutcome: Sendable, Equatable {
        case created
        case refreshed
    }

    /// Adds or refreshes a subscription.
    @discardableResult
    public func subscribe(path: DataPath, subscriber: SubscriberKey, settings: SubscriptionSettings) -> SubscribeOutcome {
        var chain: [Node] = [root]
        var node = root
        for key in path.segments {
            if let next = node.children[key] {
                node = next
            } else {
                let next = Node()
                node.children.updateValue(next, forKey: key)
                node = next
            }
            chain.append(node)
        }
        let payload = node.payload ?? Payload()
        node.payload = payload
        let previous = payload.subscribers.updateValue(settings, forKey: subscriber)
        if let previous, previous.mode.needsData { payload.dataSubscriberCount -= 1 }
        if settings.mode.needsData { payload.dataSubscriberCount += 1 }
        if payload.dataSubscriberCount == 0 { payload.shadow = nil }
        if previous != nil { return .refreshed }
        for member in chain { member.subtreeCount += 1 }
        subscriptionCount += 1
        if let uid = subscriber.uid { byUser[uid, default: []].insert(UserEntry(path: path, subscriber: subscriber)) }
        return .created
    }

    /// Removes a subscription; returns its settings when it existed.
    @discardableResult
    public func unsubscribe(path: DataPath, subscriber: SubscriberKey) -> SubscriptionSettings? {
        var chain: [(Node, String)] = []
        var node = root
        for key in path.segments {
            guard let next = node.children[key] else { return nil }
            chain.append((node, key))
            node = next
        }
        guard let payload = node.payload, let removed = payload.subscribers.removeValue(forKey: subscriber) else { return nil }
        if removed.mode.needsData {
            payload.dataSubscriberCount -= 1
            if payload.dataSubscriberCount == 0 { payload.shadow = nil }
        }
        if payload.subscribers.isEmpty { node.payload = nil }
        root.subtreeCount -= 1
        for (parent, key) in chain {
            guard let child = parent.children[key] else { break }
            child.subtreeCount -= 1
            if child.subtreeCount == 0 {
                parent.children.removeValue(forKey: key)
                break
            }
        }
        subscriptionCount -= 1
        if let uid = subscriber.uid, var entries = byUser[uid] {
            entries.remove(UserEntry(path: path, subscriber: subscriber))
            byUser[uid] = entries.isEmpty ? nil : entries
        }
        return removed
    }

    /// The subscriptions of v2 user `uid`, ordered by path then token.
    public func subscriptions(ofUser uid: String) -> [Subscription] {
        guard let entries = byUser[uid] else { return [] }
        return entries.compactMap { entry in
            subscription(path: entry.path, subscriber: entry.subscriber).map {
                Subscription(path: entry.path, subscriber: entry.subscriber, settings: $0)
            }
        }.sorted { ($0.path.description, $0.subscriber.token) < ($1.path.description, $1.subscriber.token) }
    }

    /// The subscription of `subscriber` at `path`, if any.
    public func subscription(path: DataPath, subscriber: SubscriberKey) -> SubscriptionSettings? {
        node(at: path)?.payload?.subscribers[subscriber]
    }

    /// Every subscription of the app (for listing, persistence and revocation).
    public func allSubscriptions() -> [Subscription] {
        var result: [Subscription] = []
        result.reserveCapacity(subscriptionCount)
        func visit(_ node: Node, _ path: [String]) {
            let dataPath = DataPath(validatedSegments: path)
            node.payload?.subscribers.forEach { subscriber, settings in
                result.append(Subscription(path: dataPath, subscriber: subscriber, settings: settings))
            }
            node.children.forEach { key, child in visit(child, path + [key]) }
        }
        visit(root, [])
        return result
    }

    /// The shadow at `path`: `.some(value)` when seeded, nil when unknown or not kept.
    public func shadow(at path: DataPath) -> JSONValue? { node(at: path)?.shadow }

    /// Restores a checkpointed shadow; ignored where nobody needs data any more.
    public func restoreShadow(at path: DataPath, value: JSONValue) {
        guard let node = node(at: path), node.dataSubscriberCount > 0 else { return }
        node.shadow = value
    }

    /// Number of nodes that keep a shadow, and how many of them are seeded.
    public func shadowCounts() -> (kept: Int, seeded: Int) {
        var kept = 0
        var seeded = 0
        func visit(_ node: Node) {
            if node.dataSubscriberCount > 0 {
                kept += 1
                if node.shadow != nil { seeded += 1 }
            }
            node.children.forEach { _, child in visit(child) }
        }
        visit(root)
        return (kept, seeded)
    }

    func node(at path: DataPath) -> Node? {
        var node = root
        for key in path.segments {
            guard let next = node.children[key] else { return nil }
            node = next
        }
        return node
    }

    /// The subscriptions whose expiry is at or before `now` (the expiry sweep revokes them).
    public func expiredSubscriptions(now: Int64) -> [Subscription] {
        allSubscriptions().filter { $0.settings.expiresAt <= now }
    }

    /// The `value`/`childEvent` subscriptions at `path` (those that need its shadow).
    public func dataSubscriptions(at path: DataPath) -> [Subscription] {
        var result: [Subscription] = []
        node(at: path)?.payload?.subscribers.forEach { subscriber, settings in
            if settings.mode.needsData { result.append(Subscription(path: path, subscriber: subscriber, settings: settings)) }
        }
        return result
    }

    /// The `value`/`childEvent` subscriptions whose node's shadow is longer than `limit` bytes as compact JSON.
    public func subscriptionsWithShadows(over limit: Int) -> [Subscription] {
        var result: [Subscription] = []
        func visit(_ node: Node, _ path: [String]) {
            if let shadow = node.shadow, node.dataSubscriberCount > 0, JSONWriter.bytes(shadow).count > limit {
                result += dataSubscriptions(at: DataPath(validatedSegments: path))
            }
            node.children.forEach { key, child in visit(child, path + [key]) }
        }
        visit(root, [])
        return result
    }

    /// Removes the given subscriptions (those that still exist); returns the removed ones.
    public func remove(_ subscriptions: [Subscription]) -> [Subscription] {
        subscriptions.compactMap { subscription in
            unsubscribe(path: subscription.path, subscriber: subscription.subscriber).map {
                Subscription(path: subscription.path, subscriber: subscription.subscriber, settings: $0)
            }
        }
    }

    /// Removes every subscription; returns them.
    public func removeAll() -> [Subscription] {
        let all = allSubscriptions()
        root.children.removeAll()
        root.payload = nil
        root.subtreeCount = 0
        subscriptionCount = 0
        byUser = [:]
        return all
    }
}
