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
    /// A trie node. Kept small: most nodes only lead to others. A node with subscribers is a ``Payload`` (a
    /// subclass with their fields), one object instead of a node and a payload object: that saves an object
    /// header, a malloc block's overhead and a pointer for every node with subscribers (most of them leaves).
    /// A node with a seeded shadow is a ``SeededPayload`` (a subclass of that). A node changes form by being
    /// replaced in its parent's children (``AppIndex/replace(_:with:parent:)``).
    class Node {
        /// Which class the node is: checked instead of a dynamic cast on the matching path.
        enum Form: UInt8 {
            case plain
            /// A ``Payload``.
            case subscribers
            /// A ``SeededPayload``.
            case seeded
        }

        // Field order matters: the flag and the 4-byte bound fit after the children's 8 bytes, so the fields
        // take 32 bytes and the object a 64-byte block. A node in the tree always has subscribers in its
        // subtree (an emptied node is removed at once), so no count of them is kept.
        /// The node's key in its parent's ``Children`` (the root's is empty). Held here, not in the parent, so
        /// the parent's table holds only references (issue 19).
        final let key: ExactString
        final var children = Children()
        final let form: Form
        /// ``earliestExpiry`` in 32 bits: 0 stands for every bound at or before the epoch, `UInt32.max` for none.
        private final var expiryBound: UInt32 = .max

        init(key: ExactString, form: Form = .plain) {
            self.key = key
            self.form = form
        }

        /// A node that takes `node`'s place: its key, its children (moved out of `node`) and expiry bound.
        init(replacing node: Node, form: Form) {
            key = node.key
            self.form = form
            swap(&children, &node.children)
            expiryBound = node.expiryBound
        }

        /// Nil while nobody is subscribed here.
        final var payload: Payload? { form != .plain ? unsafeDowncast(self, to: Payload.self) : nil }

        /// A lower bound of the earliest expiry in this subtree, seconds (exact right after an expiry scan visited
        /// it, unless it is at or before the epoch or after 2106): the scan skips every subtree whose bound is in
        /// the future. Stored rounded down to 32 bits, so it stays a lower bound.
        final var earliestExpiry: Int64 {
            get {
                switch expiryBound {
                case .max: return .max
                case 0: return .min
                default: return Int64(expiryBound)
                }
            }
            set {
                if newValue == .max {
                    expiryBound = .max
                } else if newValue <= 0 {
                    expiryBound = 0
                } else {
                    expiryBound = UInt32(min(newValue, Int64(UInt32.max - 1)))
                }
            }
        }

        final var subscriberCount: Int { payload?.subscribers.count ?? 0 }
        final var dataSubscriberCount: Int32 { payload?.dataSubscribers ?? 0 }
        /// Set through ``AppIndex/setShadow(_:of:)``, which keeps the byte count.
        final var shadow: JSONValue? { payload?.storedShadow }
    }

    /// A trie node with subscribers (never empty while in the trie). Its object is 96 bytes, a 112-byte block:
    /// the shadow, 17 bytes more at an 8-byte boundary, would make it 113 bytes, a 128-byte block, so only a node
    /// with a seeded shadow holds one (``SeededPayload``, issue 19).
    class Payload: Node {
        final var subscribers = CompactMap<SubscriberKey, SubscriptionSettings>()
        /// Subscribers here that need data (`value`, `childEvent`).
        final var dataSubscribers: Int32 = 0

        /// A new node (no subscribers yet: ``AppIndex/subscribe(path:subscriber:settings:)`` adds the first).
        init(key: ExactString) { super.init(key: key, form: .subscribers) }

        init(replacing node: Node) { super.init(replacing: node, form: .subscribers) }

        /// A node that takes `payload`'s place in `form`: its key, children, expiry bound and subscribers (moved
        /// out of `payload`).
        init(replacing payload: Payload, form: Form) {
            super.init(replacing: payload, form: form)
            swap(&subscribers, &payload.subscribers)
            dataSubscribers = payload.dataSubscribers
        }

        final var isSeeded: Bool { form == .seeded }

        /// The data at this node when known; nil until seeded (only a ``SeededPayload`` holds one).
        final var storedShadow: JSONValue? { isSeeded ? unsafeDowncast(self, to: SeededPayload.self).seededShadow : nil }
    }

    /// A node whose shadow was seeded. Kept only while `dataSubscribers > 0`; a payload becomes one when its shadow
    /// is first set, and goes back to a ``Payload`` when its last subscriber that needs data goes.
    final class SeededPayload: Payload {
        // No count of the shadow's bytes is kept (``AppIndex/setShadow(_:of:)`` measures the old one again): without
        // it the object is 113 bytes, a 128-byte block, instead of a 144-byte one (issue 19).
        var seededShadow: JSONValue?

        init(replacing payload: Payload) { super.init(replacing: payload, form: .seeded) }
    }

    // The stored properties of Node and Payload, laid out as the classes lay them out after their header
    // (a subclass's fields follow its superclass's): their heap cost follows the fields (``HeapCost/object(fields:)``).
    private struct NodeFields {
        var key: ExactString
        var children: Children
        var form: Node.Form
        var expiryBound: UInt32
    }
    private struct PayloadFields {
        var node: NodeFields
        var subscribers: CompactMap<SubscriberKey, SubscriptionSettings>
        var dataSubscriberCount: Int32
    }
    private struct SeededFields {
        var payload: PayloadFields
        var shadow: JSONValue?
    }
    static let nodeBytes = HeapCost.object(fields: MemoryLayout<NodeFields>.size)
    /// What a node with subscribers costs more than one without.
    static let payloadBytes = HeapCost.object(fields: MemoryLayout<PayloadFields>.size) - nodeBytes
    /// What a node with a seeded shadow costs more than one with subscribers (the shadow's JSON apart).
    static let seededBytes = HeapCost.object(fields: MemoryLayout<SeededFields>.size) - nodeBytes - payloadBytes

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
    private(set) var root = Node(key: "")
    public private(set) var subscriptionCount = 0
    /// Where changes of ``byteCount`` are added (the app's meter, which adds into its partition's and the
    /// replica's). Nil: not metered.
    public let meter: ByteMeter?
    /// Estimated heap bytes of the trie, payloads, strings and shadows (the top-level maps are added in
    /// ``byteCount``).
    private var storedBytes = 0
    /// The subscriptions of each v2 user (subscribers with a uid), in list order, for the v2 API's list/get. Keyed
    /// by the uid as stored (``SubscriberKey/packedUID``).
    private var byUser: [PackedToken: [UserEntry]] = [:]
    /// Subscriptions per owning uid (the auth token's uid; v2: the subscriber's uid), for the per-uid quota. Keyed by
    /// the uid as stored (``SubscriptionSettings/packedAuthUID``).
    private var perOwner: [PackedToken: Int32] = [:]
    /// Subscriptions per push destination, for the per-device quota (and each device's stored token).
    private var perDevice = DeviceCounts()
    /// The shadows the last ``apply(_:now:)`` changed, to be checkpointed with the subscriptions.
    public internal(set) var changedShadows: [(path: DataPath, value: JSONValue)] = []

    public init(app: String, meter: ByteMeter? = nil) {
        self.app = app
        self.meter = meter
        storedBytes = Self.baseBytes
        meter?.add(byteCount)
    }

    deinit { meter?.add(-byteCount) }

    // MARK: Bytes

    /// The index object and its root node.
    static let baseBytes = HeapCost.object(fields: 128) + nodeBytes

    /// An estimate of the heap bytes this app's index holds, never below the truth for the structures it
    /// counts: each trie node (object, key string, its share of its parent's child table), each payload and
    /// subscriber entry (with its filters, ``SubscriptionSettings/extraBytes``, and its device key,
    /// ``DeviceEncryption/heapBytes``, when it has them), each device's token and each uid (stored once: the
    /// subscriptions of one device or user share one ``PackedToken``, see ``subscribe(path:subscriber:settings:)``;
    /// a uid is counted once while the per-user or the per-owner index holds it), the per-device, per-user and
    /// per-owner indexes, and each shadow's JSON. O(1): maintained on every change.
    ///
    /// Calibrated with `Benchmarks/Sources/SubscriptionMemory` (docs/ARCHITECTURE.md, "Identities, quotas,
    /// abuse").
    public var byteCount: Int {
        storedBytes
            + perDevice.heapBytes
            + HeapCost.dictionary(
                capacity: perOwner.capacity, keyStride: MemoryLayout<PackedToken>.stride, valueStride: MemoryLayout<Int32>.stride)
            + HeapCost.dictionary(
                capacity: byUser.capacity, keyStride: MemoryLayout<PackedToken>.stride,
                valueStride: MemoryLayout<[UserEntry]>.stride)
    }

    /// Reports the change of ``byteCount`` since `before` to the meter.
    func report(since before: Int) {
        meter?.add(byteCount - before)
    }

    private static func entryBytes(_ entries: [UserEntry]) -> Int {
        HeapCost.array(capacity: entries.capacity, stride: MemoryLayout<UserEntry>.stride)
    }

    /// By the segment count, not the array's capacity: the capacity Swift reports comes from the block malloc
    /// returned, which may be larger than asked (a reused free block), so it would make the estimate differ from
    /// ``bytesToSubscribe(path:subscriber:settings:)``'s prediction now and then.
    private static func pathBytes(_ path: DataPath) -> Int {
        HeapCost.array(capacity: path.segments.count, stride: MemoryLayout<ExactString>.stride)
    }

    /// The bytes that subscribing `subscriber` at `path` would add: what a create reserves against the byte
    /// budgets before it is written. For a refresh, only what a larger device key or more filters add (0 most
    /// often).
    /// O(path length).
    public func bytesToSubscribe(path: DataPath, subscriber: SubscriberKey, settings: SubscriptionSettings) -> Int {
        var total = settings.encryption?.heapBytes ?? 0
        var node: Node? = root
        var parent = root
        for key in path.segments {
            if let current = node, let next = current.children[key] {
                node = next
                parent = next
                continue
            }
            if node != nil { total += parent.children.growthForNewKey }
            node = nil
            total += Self.nodeBytes + HeapCost.string(key.string)
        }
        if let node, let payload = node.payload {
            if let existing = payload.subscribers[subscriber] {
                return max(0, total + settings.extraBytes - existing.extraBytes - (existing.encryption?.heapBytes ?? 0))
            }
            total += payload.subscribers.growthForNewKey
        } else {
            total += Self.payloadBytes
        }
        total += settings.extraBytes
        if perDevice.count(of: subscriber.device) == 0 { total += subscriber.packedToken.heapBytes }
        total += perDevice.growthForOneMore(subscriber.device)
        if let owner = settings.packedAuthUID, perOwner[owner] == nil {
            total += (byUser[owner] == nil ? owner.heapBytes : 0)
                + HeapCost.dictionaryGrowth(
                    count: perOwner.count, capacity: perOwner.capacity, keyStride: MemoryLayout<PackedToken>.stride,
                    valueStride: MemoryLayout<Int32>.stride)
        }
        if let uid = subscriber.packedUID {
            total += HeapCost.array(capacity: path.segments.count, stride: MemoryLayout<ExactString>.stride)
            if let entries = byUser[uid] {
                if entries.count + 1 > entries.capacity {
                    total += HeapCost.array(capacity: max(entries.count + 1, entries.capacity * 2), stride: MemoryLayout<UserEntry>.stride)
                        - Self.entryBytes(entries)
                }
            } else {
                let counted = perOwner[uid] != nil || settings.packedAuthUID == uid
                total += (counted ? 0 : uid.heapBytes) + HeapCost.array(capacity: 1, stride: MemoryLayout<UserEntry>.stride)
                    + HeapCost.dictionaryGrowth(
                        count: byUser.count, capacity: byUser.capacity, keyStride: MemoryLayout<PackedToken>.stride,
                        valueStride: MemoryLayout<[UserEntry]>.stride)
            }
        }
        return total
    }

    /// Puts `replacement` in `node`'s place (it has `node`'s key): `parent`'s child, or the root when there is no
    /// parent.
    private func replace(_ node: Node, with replacement: Node, parent: Node?) {
        if let parent {
            parent.children.replace(with: replacement)
        } else {
            root = replacement
        }
    }

    /// Sets a seeded node's shadow, keeping ``byteCount``: the old shadow's bytes are measured again (the same
    /// value, so the same count as when it was set) and taken off.
    func setShadow(_ value: JSONValue?, of seeded: SeededPayload) {
        storedBytes -= seeded.seededShadow.map(HeapCost.json) ?? 0
        seeded.seededShadow = value
        storedBytes += value.map(HeapCost.json) ?? 0
    }

    /// Sets `payload`'s shadow to `value` now when it is seeded. A payload not seeded yet is added to `seeds`: it
    /// becomes a ``SeededPayload`` in its parent's children when the caller passes them to ``seed(_:)`` (after its
    /// walk of the trie). A nil `value` leaves a payload not seeded as it is.
    func storeShadow(_ value: JSONValue?, of payload: Payload, parent: Node?, seeds: inout [PendingSeed]) {
        if payload.isSeeded {
            setShadow(value, of: unsafeDowncast(payload, to: SeededPayload.self))
        } else if let value {
            seeds.append(PendingSeed(payload: payload, parent: parent, value: value))
        }
    }

    /// A shadow to seed once a walk of the trie is over (``storeShadow(_:of:parent:seeds:)``).
    struct PendingSeed {
        var payload: Payload
        var parent: Node?
        var value: JSONValue
    }

    /// Makes each payload a ``SeededPayload`` holding its shadow, in its parent's place: the last found first, so
    /// a node below another (found after it on a walk from the root) is replaced while its parent still holds it.
    func seed(_ seeds: [PendingSeed]) {
        for pending in seeds.reversed() {
            let seeded = SeededPayload(replacing: pending.payload)
            replace(pending.payload, with: seeded, parent: pending.parent)
            storedBytes += Self.seededBytes
            setShadow(pending.value, of: seeded)
        }
    }

    /// Turns a seeded node back into a ``Payload`` (its last subscriber that needs data went): the shadow goes.
    @discardableResult
    private func unseed(_ payload: Payload, parent: Node?) -> Payload {
        guard payload.isSeeded else { return payload }
        setShadow(nil, of: unsafeDowncast(payload, to: SeededPayload.self))
        let plain = Payload(replacing: payload, form: .subscribers)
        replace(payload, with: plain, parent: parent)
        storedBytes -= Self.seededBytes
        return plain
    }

    /// The stored copy of a device's token, of a uid: every subscription of one device (one user) shares one
    /// ``PackedToken``, so each is held, and counted, once.
    /// Also returns where the device is counted (nil: not yet), so that a create counts it without a second lookup.
    private func canonical(
        _ subscriber: SubscriberKey, _ settings: SubscriptionSettings
    ) -> (SubscriberKey, SubscriptionSettings, DeviceCounts.Index?) {
        var subscriber = subscriber
        var settings = settings
        let counted = perDevice.find(subscriber.device)
        if let counted { subscriber.packedToken = perDevice.storedToken(at: counted) }
        func stored(_ uid: PackedToken) -> PackedToken? {
            if let index = perOwner.index(forKey: uid) { return perOwner[index].key }
            if let index = byUser.index(forKey: uid) { return byUser[index].key }
            return nil
        }
        if let uid = subscriber.packedUID {
            subscriber.packedUID = stored(uid) ?? uid
        }
        if let owner = settings.packedAuthUID {
            if let uid = subscriber.packedUID, uid == owner {
                settings.packedAuthUID = uid
            } else {
                settings.packedAuthUID = stored(owner) ?? owner
            }
        }
        return (subscriber, settings, counted)
    }

    // MARK: Subscriptions

    public enum SubscribeOutcome: Sendable, Equatable {
        case created
        case refreshed
    }

    /// Adds or refreshes a subscription.
    @discardableResult
    public func subscribe(path: DataPath, subscriber: SubscriberKey, settings: SubscriptionSettings) -> SubscribeOutcome {
        let before = byteCount
        defer { report(since: before) }
        // `counted` stays valid: nothing below changes the per-device table before the count.
        let (subscriber, settings, counted) = canonical(subscriber, settings)
        var chain: [Node] = [root]
        chain.reserveCapacity(path.segments.count + 1)
        // The path as the trie stores its keys (the per-user index shares those strings).
        var keys: [ExactString] = []
        let keepsKeys = subscriber.packedUID != nil
        if keepsKeys { keys.reserveCapacity(path.segments.count) }
        var node = root
        for (position, key) in path.segments.enumerated() {
            if let next = node.children[key] {
                node = next
                if keepsKeys { keys.append(next.key) }
            } else {
                // The subscribed node itself is made a payload node at once (filled below).
                let next = position == path.segments.count - 1 ? Payload(key: key) : Node(key: key)
                let grown = node.children.heapBytes
                node.children.insert(next)
                storedBytes += node.children.heapBytes - grown + Self.nodeBytes + HeapCost.string(key.string)
                node = next
                if keepsKeys { keys.append(key) }
            }
            chain.append(node)
        }
        for member in chain where settings.expiresAt < member.earliestExpiry { member.earliestExpiry = settings.expiresAt }
        let payload: Payload
        if let existing = node.payload {
            payload = existing
            if existing.subscribers.isEmpty { storedBytes += Self.payloadBytes }  // made just now, above
        } else {
            payload = Payload(replacing: node)
            replace(node, with: payload, parent: chain.count > 1 ? chain[chain.count - 2] : nil)
            storedBytes += Self.payloadBytes
        }
        let grown = payload.subscribers.heapBytes
        let previous = payload.subscribers.updateValue(settings, forKey: subscriber)
        storedBytes += payload.subscribers.heapBytes - grown + settings.extraBytes - (previous?.extraBytes ?? 0)
            + (settings.encryption?.heapBytes ?? 0) - (previous?.encryption?.heapBytes ?? 0)
        if let previous, previous.mode.needsData { payload.dataSubscribers -= 1 }
        if settings.mode.needsData { payload.dataSubscribers += 1 }
        if payload.dataSubscribers == 0 { unseed(payload, parent: chain.count > 1 ? chain[chain.count - 2] : nil) }
        if let previous {
            if previous.packedAuthUID != settings.packedAuthUID {
                count(owner: previous.packedAuthUID, by: -1)
                count(owner: settings.packedAuthUID, by: 1)
            }
            return .refreshed
        }
        subscriptionCount += 1
        count(owner: settings.packedAuthUID, by: 1)
        let device = subscriber.device
        if perDevice.increment(device, at: counted) { storedBytes += subscriber.packedToken.heapBytes }
        if let key = subscriber.packedUID {
            let entry = UserEntry(path: DataPath(validatedSegments: keys), subscriber: subscriber)
            var entries = byUser.removeValue(forKey: key) ?? []
            if entries.isEmpty, perOwner[key] == nil { storedBytes += key.heapBytes }
            let grownEntries = Self.entryBytes(entries)
            let position = entries.partitioningIndex { !$0.precedes(entry) }
            entries.insert(entry, at: position)
            storedBytes += Self.entryBytes(entries) - grownEntries + Self.pathBytes(entry.path)
            byUser[key] = entries
        }
        return .created
    }

    /// Removes a subscription; returns its settings when it existed.
    @discardableResult
    public func unsubscribe(path: DataPath, subscriber: SubscriberKey) -> SubscriptionSettings? {
        let before = byteCount
        defer { report(since: before) }
        var chain: [(Node, ExactString)] = []
        chain.reserveCapacity(path.segments.count)
        var node = root
        for key in path.segments {
            guard let next = node.children[key] else { return nil }
            chain.append((node, key))
            node = next
        }
        guard var payload = node.payload else { return nil }
        let shrunk = payload.subscribers.heapBytes
        guard let removed = payload.subscribers.removeValue(forKey: subscriber) else { return nil }
        storedBytes += payload.subscribers.heapBytes - shrunk - removed.extraBytes - (removed.encryption?.heapBytes ?? 0)
        if removed.mode.needsData {
            payload.dataSubscribers -= 1
            if payload.dataSubscribers == 0 {
                payload = unseed(payload, parent: chain.last?.0)
                node = payload
            }
        }
        if payload.subscribers.isEmpty {
            storedBytes -= Self.payloadBytes
            if chain.isEmpty || !payload.children.isEmpty {
                // It stays in the trie (the root, or a node with children): as a node without subscribers.
                node = Node(replacing: payload, form: .plain)
                replace(payload, with: node, parent: chain.last?.0)
            }
        }
        // Nodes left with no subscriber below them go, from the bottom up.
        var emptied = node
        for (parent, key) in chain.reversed() {
            guard emptied.subscriberCount == 0, emptied.children.isEmpty else { break }
            let held = parent.children.heapBytes
            parent.children.remove(key: key)
            storedBytes += parent.children.heapBytes - held - Self.nodeBytes - HeapCost.string(key.string)
            emptied = parent
        }
        subscriptionCount -= 1
        count(owner: removed.packedAuthUID, by: -1)
        let device = subscriber.device
        if let token = perDevice.decrement(device) { storedBytes -= token.heapBytes }
        // Changed in place: the stored key (the uid the user's subscriptions share) stays, not the caller's copy.
        if let uid = subscriber.packedUID, let index = byUser.index(forKey: uid) {
            let entry = UserEntry(path: path, subscriber: subscriber)
            let held = Self.entryBytes(byUser.values[index])
            if let position = byUser.values[index].firstIndex(of: entry) {
                storedBytes -= Self.pathBytes(byUser.values[index][position].path)
                byUser.values[index].remove(at: position)
            }
            storedBytes += Self.entryBytes(byUser.values[index]) - held
            if byUser.values[index].isEmpty {
                // The user's last subscription: its uid and its emptied list (freed with it) go.
                let uidBytes = perOwner[byUser.keys[index]] == nil ? byUser.keys[index].heapBytes : 0
                storedBytes -= uidBytes + Self.entryBytes(byUser.values[index])
                byUser.remove(at: index)
            }
        }
        return removed
    }

    private func count(owner: PackedToken?, by delta: Int32) {
        guard let owner else { return }
        if let index = perOwner.index(forKey: owner) {
            let updated = perOwner.values[index] + delta
            if updated > 0 {
                perOwner.values[index] = updated
            } else {
                if byUser[perOwner.keys[index]] == nil { storedBytes -= perOwner.keys[index].heapBytes }
                perOwner.remove(at: index)
            }
        } else if delta > 0 {
            perOwner[owner] = delta
            if byUser[owner] == nil { storedBytes += owner.heapBytes }
        }
    }

    // MARK: Quotas

    /// Subscriptions owned by `uid` (made with its auth token).
    public func subscriptionCount(owner uid: String) -> Int { Int(perOwner[PackedToken.make(uid)] ?? 0) }

    /// Subscriptions that reach `device`.
    public func subscriptionCount(device: DeviceKey) -> Int { Int(perDevice.count(of: device)) }

    // MARK: Queries

    /// The subscriptions of v2 user `uid`, ordered by path then token (bytes). O(the user's subscriptions).
    public func subscriptions(ofUser uid: String) -> [Subscription] {
        guard let entries = byUser[PackedToken.make(uid)] else { return [] }
        return entries.compactMap { entry in
            subscription(path: entry.path, subscriber: entry.subscriber).map {
                Subscription(path: entry.path, subscriber: entry.subscriber, settings: $0)
            }
        }
    }

    /// The devices of user `uid`, for a user notification: one subscription per distinct destination (kind, token)
    /// among the user's subscriptions, the v2 ones (their uid) and the v1 ones made with the user's auth token (their
    /// owner). A device's notification goes into that subscription's delivery line, in that subscription's format:
    /// the first v2-format one of the device with the device's own key (`encryption`), else its first v2-format one
    /// (by path, then token), else its first v1 one. Ordered by token (bytes).
    ///
    /// O(the user's v2 subscriptions) when the user owns no v1 subscription; a user who does (the per-owner count
    /// says so) costs a walk of the app's subscriptions, which stops once all of them are found (v1 subscriptions are
    /// not indexed by owner: docs/PAYLOADS.md, "Notifications addressed to a user").
    public func devices(ofUser uid: String) -> [Subscription] {
        var chosen: [DeviceKey: Subscription] = [:]
        func consider(_ subscription: Subscription) {
            let device = subscription.subscriber.device
            guard let current = chosen[device] else {
                chosen[device] = subscription
                return
            }
            // v2 over v1; among v2, a subscription with the device's own key (its messages are for it alone).
            if current.settings.format != .v2, subscription.settings.format == .v2 {
                chosen[device] = subscription
            } else if current.settings.format == .v2, current.settings.encryption == nil, subscription.settings.encryption != nil {
                chosen[device] = subscription
            }
        }
        let v2 = subscriptions(ofUser: uid)
        v2.forEach(consider)
        let owner = PackedToken.make(uid)
        var v1Left = Int(perOwner[owner] ?? 0) - v2.reduce(0) { $0 + ($1.settings.packedAuthUID == owner ? 1 : 0) }
        if v1Left > 0 {
            var v1: [Subscription] = []
            forEachSubscription { subscription in
                guard v1Left > 0, subscription.subscriber.packedUID == nil, subscription.settings.packedAuthUID == owner else { return }
                v1.append(subscription)
                v1Left -= 1
            }
            v1.sorted { $0.path.description.utf8.lexicographicallyPrecedes($1.path.description.utf8) }.forEach(consider)
        }
        return chosen.values.sorted {
            let (left, right) = ($0.subscriber.token.utf8, $1.subscriber.token.utf8)
            if !left.elementsEqual(right) { return left.lexicographicallyPrecedes(right) }
            return $0.subscriber.kind.rawValue < $1.subscriber.kind.rawValue
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
            node.children.forEach { child in
                stack.append(child.key)
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
        var parent: Node?
        var node = root
        for key in path.segments {
            guard let next = node.children[key] else { return }
            parent = node
            node = next
        }
        guard let payload = node.payload, payload.dataSubscribers > 0 else { return }
        let before = byteCount
        var seeds: [PendingSeed] = []
        storeShadow(value, of: payload, parent: parent, seeds: &seeds)
        seed(seeds)
        report(since: before)
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
            node.children.forEach { child in visit(child) }
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
            node.children.forEach { child in
                stack.append(child.key)
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
            node.children.forEach { child in
                stack.append(child.key)
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
        let before = byteCount
        defer { report(since: before) }
        let all = allSubscriptions()
        storedBytes = Self.baseBytes
        root = Node(key: "")
        subscriptionCount = 0
        byUser = [:]
        perOwner = [:]
        perDevice = DeviceCounts()
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
