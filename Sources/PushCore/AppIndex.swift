/// The subscriptions of one app, indexed by path in a trie, with the shadow (in-memory copy of the data)
/// of every node that has a `value` or `childEvent` subscription.
///
/// Matching an event walks the write's path from the root (subscriptions at or above the write) and the
/// subtree below the write (subscriptions below it); nothing else is visited, so the cost does not depend
/// on subscriptions off the write's path.
///
/// Identities are compared by bytes: trie keys are ``ExactString``s, subscribers ``SubscriberKey``s, uids and
/// devices ``ExactString``/``DeviceKey``. The counts the quotas need (per app, per uid, per device) are kept
/// up to date on every change, so a quota check is O(1).
///
/// Not thread-safe: the owner serialises access (one lock per app).
public final class AppIndex {
    /// A trie node. Kept small: most nodes only lead to others; what a node with subscribers needs lives in
    /// its ``Payload``.
    final class Node {
        var children = CompactMap<ExactString, Node>()
        /// Nil while nobody is subscribed here.
        var payload: Payload?
        /// Subscribers in this node's subtree, itself included.
        var subtreeCount: Int32 = 0
        /// A lower bound of the earliest expiry in this subtree (exact right after an expiry scan visited it):
        /// the scan skips every subtree whose bound is in the future.
        var earliestExpiry: Int64 = .max

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

        /// The v2 list order: path, then token (bytes).
        func precedes(_ other: UserEntry) -> Bool {
            let left = path.description.utf8
            let right = other.path.description.utf8
            if !left.elementsEqual(right) { return left.lexicographicallyPrecedes(right) }
            return subscriber.token.utf8.lexicographicallyPrecedes(other.subscriber.token.utf8)
        }
    }

    public let app: String
    let root = Node()
    public private(set) var subscriptionCount = 0
    /// The subscriptions of each v2 user (subscribers with a uid), in list order, for the v2 API's list/get.
    private var byUser: [ExactString: [UserEntry]] = [:]
    /// Subscriptions per owning uid (the auth token's uid; v2: the subscriber's uid), for the per-uid quota.
    private var perOwner: [ExactString: Int32] = [:]
    /// Subscriptions per push destination, for the per-device quota.
    private var perDevice: [DeviceKey: Int32] = [:]
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
        chain.reserveCapacity(path.segments.count + 1)
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
        for member in chain where settings.expiresAt < member.earliestExpiry { member.earliestExpiry = settings.expiresAt }
        let payload = node.payload ?? Payload()
        node.payload = payload
        let previous = payload.subscribers.updateValue(settings, forKey: subscriber)
        if let previous, previous.mode.needsData { payload.dataSubscriberCount -= 1 }
        if settings.mode.needsData { payload.dataSubscriberCount += 1 }
        if payload.dataSubscriberCount == 0 { payload.shadow = nil }
        if let previous {
            if previous.owner != settings.owner {
                count(owner: previous.owner, by: -1)
                count(owner: settings.owner, by: 1)
            }
            return .refreshed
        }
        for member in chain { member.subtreeCount += 1 }
        subscriptionCount += 1
        count(owner: settings.owner, by: 1)
        perDevice[subscriber.device, default: 0] += 1
        if let uid = subscriber.uid {
            let entry = UserEntry(path: path, subscriber: subscriber)
            var entries = byUser.removeValue(forKey: ExactString(uid)) ?? []
            let position = entries.partitioningIndex { !$0.precedes(entry) }
            entries.insert(entry, at: position)
            byUser[ExactString(uid)] = entries
        }
        return .created
    }

    /// Removes a subscription; returns its settings when it existed.
    @discardableResult
    public func unsubscribe(path: DataPath, subscriber: SubscriberKey) -> SubscriptionSettings? {
        var chain: [(Node, ExactString)] = []
        chain.reserveCapacity(path.segments.count)
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
        count(owner: removed.owner, by: -1)
        let device = subscriber.device
        if let devices = perDevice[device], devices > 1 { perDevice[device] = devices - 1 } else { perDevice[device] = nil }
        if let uid = subscriber.uid, var entries = byUser.removeValue(forKey: ExactString(uid)) {
            let entry = UserEntry(path: path, subscriber: subscriber)
            if let position = entries.firstIndex(of: entry) { entries.remove(at: position) }
            if !entries.isEmpty { byUser[ExactString(uid)] = entries }
        }
        return removed
    }

    private func count(owner: ExactString?, by delta: Int32) {
        guard let owner else { return }
        let updated = (perOwner[owner] ?? 0) + delta
        perOwner[owner] = updated > 0 ? updated : nil
    }

    // MARK: Quotas

    /// Subscriptions owned by `uid` (made with its auth token).
    public func subscriptionCount(owner uid: String) -> Int { Int(perOwner[ExactString(uid)] ?? 0) }

    /// Subscriptions that reach `device`.
    public func subscriptionCount(device: DeviceKey) -> Int { Int(perDevice[device] ?? 0) }

    // MARK: Queries

    /// The subscriptions of v2 user `uid`, ordered by path then token (bytes). O(the user's subscriptions).
    public func subscriptions(ofUser uid: String) -> [Subscription] {
        guard let entries = byUser[ExactString(uid)] else { return [] }
        return entries.compactMap { entry in
            subscription(path: entry.path, subscriber: entry.subscriber).map {
                Subscription(path: entry.path, subscriber: entry.subscriber, settings: $0)
            }
        }
    }

    /// The subscription of `subscriber` at `path`, if any.
    public func subscription(path: DataPath, subscriber: SubscriberKey) -> SubscriptionSettings? {
        node(at: path)?.payload?.subscribers[subscriber]
    }

    /// Calls `body` with every subscription of the app. O(nodes): the path is one growing stack, never copied
    /// per level.
    public func forEachSubscription(_ body: (Subscription) -> Void) {
        var stack: [ExactString] = []
        func visit(_ node: Node) {
            if let payload = node.payload {
                let path = DataPath(validatedSegments: stack)
                payload.subscribers.forEach { subscriber, settings in
                    body(Subscription(path: path, subscriber: subscriber, settings: settings))
                }
            }
            node.children.forEach { key, child in
                stack.append(key)
                visit(child)
                stack.removeLast()
            }
        }
        visit(root)
    }

    /// Every subscription of the app (for revocation of the whole app).
    public func allSubscriptions() -> [Subscription] {
        var result: [Subscription] = []
        result.reserveCapacity(subscriptionCount)
        forEachSubscription { result.append($0) }
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
    ///
    /// Visits only the subtrees whose earliest-expiry bound is due, and tightens the bounds it passes, so a
    /// sweep that finds nothing due costs O(1) and one that does costs about the nodes on the way to the due
    /// subscriptions (and their siblings' bounds).
    public func expiredSubscriptions(now: Int64) -> [Subscription] {
        var result: [Subscription] = []
        var stack: [ExactString] = []
        @discardableResult
        func visit(_ node: Node) -> Int64 {
            guard node.earliestExpiry <= now else { return node.earliestExpiry }
            var earliest = Int64.max
            if let payload = node.payload {
                var path: DataPath?
                payload.subscribers.forEach { subscriber, settings in
                    earliest = min(earliest, settings.expiresAt)
                    guard settings.expiresAt <= now else { return }
                    let at = path ?? DataPath(validatedSegments: stack)
                    path = at
                    result.append(Subscription(path: at, subscriber: subscriber, settings: settings))
                }
            }
            node.children.forEach { key, child in
                stack.append(key)
                earliest = min(earliest, visit(child))
                stack.removeLast()
            }
            node.earliestExpiry = earliest
            return earliest
        }
        visit(root)
        return result
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
        var stack: [ExactString] = []
        func visit(_ node: Node) {
            if let shadow = node.shadow, node.dataSubscriberCount > 0, JSONWriter.bytes(shadow).count > limit {
                result += dataSubscriptions(at: DataPath(validatedSegments: stack))
            }
            node.children.forEach { key, child in
                stack.append(key)
                visit(child)
                stack.removeLast()
            }
        }
        visit(root)
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
        root.earliestExpiry = .max
        subscriptionCount = 0
        byUser = [:]
        perOwner = [:]
        perDevice = [:]
        return all
    }
}

extension Array {
    /// The first index whose element satisfies `belongsInSecondPartition` (the array is partitioned by it).
    func partitioningIndex(where belongsInSecondPartition: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongsInSecondPartition(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
