/// Every notification on its way to a provider, per subscription (``RetryKey``), in order (SPEC §8): the one
/// place that orders sends, retries and revokes.
///
/// - Per subscription: FIFO, at most one notification in flight (``due(now:limit:)`` hands out the head and
///   marks it; ``completed(_:)`` or ``failed(_:now:retryAfter:quotaExceeded:policy:random:)`` resolves it).
///   Notifications of different subscriptions go out independently.
/// - A `revoke` is queued like any notification, after what its subscription already has: those go first
///   (delivered, or discarded at their deadline), and the revoke is the subscription's last message.
///   ``removeAll(forSubscription:)`` drops a line instead (a dead token: nothing can reach it).
/// - Coalescing, only while the subscription is backing off (its head has failed): a new notification is
///   merged into the LAST entry when that one is not in flight: noData after noData and value after value
///   keep the latest; childEvent after childEvent merges (``ChildChanges/merged(with:)``) and disappears
///   when the changes cancel out. The merged entry keeps the earliest `firstFailureAt` and the replaced
///   entry's `attempt`/`notBefore` (so a backing-off head keeps its schedule). Revokes are never merged.
/// - After a failure the head is coalesced with the entries behind it the same way.
/// - After a success the next entry uses its own schedule (normally due at once).
/// - Project-wide pauses by scope (``pause(scope:until:)``): a subscription whose head is in a paused scope is
///   not due before the pause ends.
/// - Deadline: when the head's next attempt would land after `firstFailureAt + deadline`, every pending entry
///   of the subscription is discarded (returned, so that the caller can settle what waits for them); the
///   subscription itself is not touched.
/// - Holds (``PendingNotification/holds``) of entries that leave the queue without being handed out
///   (merged away, cancelled, removed) are collected for the caller: ``takeReleasedHolds()``.
/// - Gates (``Gate``, given by the `gate` function at init, e.g. one webhook destination host): at most
///   `limit` heads of one gate are in flight. A due head whose gate is full is set aside (parked, in its
///   place in the order) without taking anything from `due`'s `limit`, and the lines of other gates are
///   handed out; each resolved head of the gate puts the earliest parked lines back (as many as there are
///   free places), so a gate's lines go out in their order as it frees places.
/// - Paces (``Pace``, given by the `pace` function at init, e.g. one provider project's send quota): a token
///   bucket per pace; a due head of a pace without a token (or behind lines already waiting for it) is set aside
///   in its place in the order; at each `due`, the earliest set-aside lines take the tokens that came meanwhile
///   and are handed out. ``nextWakeUp`` includes the time of a waiting pace's next token. Lines of other paces
///   (and lines without one) are not held up.
///
/// Cost: O(log n) per operation (a min-heap of wake-up times with lazy invalidation, compacted when stale items
/// pile up); a subscription's own line is an array, short because of coalescing.
///
/// Not thread-safe: the owner serialises access.
public final class DeliveryQueue {
    public enum EnqueueOutcome: Sendable, Equatable {
        /// Appended at the end of its subscription's line.
        case queued
        /// Merged into (or replaced) the last pending entry of its subscription.
        case coalesced
        /// Its childEvent changes cancelled those of the last pending entry: both are gone.
        case cancelled
    }

    public enum FailureOutcome: Sendable, Equatable {
        /// The failed notification (possibly merged with later ones) is retried at this time (pauses included).
        case scheduled(at: Double)
        /// The deadline is over: the subscription's pending notifications were discarded (these).
        case discarded([PendingNotification])
        /// Nothing to retry: the notification was removed meanwhile (``removeAll(forSubscription:)``), cancelled
        /// by later changes, or nothing was in flight for this key.
        case superseded
    }

    /// One subscription's pending notifications; `entries` is never empty.
    struct Line {
        var entries: [PendingNotification]
        /// `entries[0]` was handed out by `due` and not resolved yet.
        var inFlight = false
        /// The in-flight head was removed (`removeAll`): drop it when resolved, do not retry it.
        var headRemoved = false
        /// Identifies the line's valid heap item (older items are stale).
        var ticket: UInt64 = 0
        /// The gate the in-flight head took a place of.
        var gate: String?
        /// The head took a token of its pace (it waited for one): it is not paced again before it is handed out.
        var paced = false

        /// The subscription is backing off: its head has failed at least once.
        var isBackingOff: Bool { (entries.first?.attempt ?? 0) > 0 }
    }

    /// Lines that share a limit of heads in flight (``DeliveryQueue``'s documentation); `key` names it.
    public struct Gate: Sendable, Equatable {
        public var key: String
        public var limit: Int

        public init(key: String, limit: Int) {
            self.key = key
            self.limit = max(1, limit)
        }
    }

    /// A send rate shared by lines (``DeliveryQueue``'s documentation): `rate` heads handed out per second,
    /// up to `burst` at once after an idle time; `key` names it.
    public struct Pace: Sendable, Equatable {
        /// Names the pace (the provider project: `fcm:<project id>`, `hms:<app id>`).
        public var key: String
        /// Heads handed out per second, once the burst is spent.
        public var rate: Double
        /// Heads that may be handed out at once after an idle time (the bucket's size).
        public var burst: Int

        public init(key: String, rate: Double, burst: Int) {
            self.key = key
            self.rate = max(rate, 0)
            self.burst = max(1, burst)
        }

        /// The pace that keeps every window of `window` seconds at or under `sends` (a provider's quota, whose
        /// windows are not aligned to ours): a burst of at most 100 ms of sends (and 2 % of the quota), the
        /// rate lowered by that burst (`(sends - burst) / window`). Nil for `sends <= 0` (unpaced).
        public static func quota(key: String, sends: Int, per window: Double) -> Pace? {
            guard sends > 0, window > 0 else { return nil }
            let quota = Double(sends)
            let burst = max(1, min(quota / window * 0.1, quota * 0.02).rounded(.down))
            return Pace(key: key, rate: max(quota - burst, 1) / window, burst: Int(burst))
        }
    }

    /// A pace's token bucket and the heap items of its due lines set aside until tokens come.
    private struct PaceState {
        var pace: Pace
        var bucket: TokenBucket
        var parked = WakeUpHeap()
        /// Heads handed out after waiting for a token, since the last ``takePacedSends()``.
        var pacedSends = 0
        /// `parked.count` as last returned by ``takeWaitingForPaceChanges()``.
        var reportedWaiting = 0

        init(_ pace: Pace) {
            self.pace = pace
            self.bucket = TokenBucket(rate: pace.rate, burst: pace.burst)
        }

        /// Takes the pace as last given (a changed setting starts a new, full bucket).
        mutating func update(_ given: Pace) {
            guard given != pace else { return }
            pace = given
            bucket = TokenBucket(rate: given.rate, burst: given.burst)
        }
    }

    /// A gate's heads in flight, its limit as last seen, and the heap items of its due lines set aside.
    private struct GateState {
        var inFlight = 0
        var limit = 1
        var parked = WakeUpHeap()
    }

    private var lines: [RetryKey: Line] = [:]
    private var heap = WakeUpHeap()
    private let gateOf: (PendingNotification) -> Gate?
    private var gates: [String: GateState] = [:]
    private let paceOf: (PendingNotification) -> Pace?
    private var paces: [String: PaceState] = [:]
    private var pauses: [ExactString: Double] = [:]
    private var nextTicket: UInt64 = 0
    private var released: [UInt64] = []

    /// Pending notifications, in flight included.
    public private(set) var count = 0
    /// Notifications handed out by `due` and not resolved yet.
    public private(set) var inFlightCount = 0

    /// - Parameters:
    ///   - gate: the gate of a head about to be handed out, nil for none (asked at each hand-out, so a changed
    ///     limit applies to the next one).
    ///   - pace: the pace of a head about to be handed out, nil for none (asked likewise).
    public init(
        gate: @escaping (PendingNotification) -> Gate? = { _ in nil }, pace: @escaping (PendingNotification) -> Pace? = { _ in nil }
    ) {
        self.gateOf = gate
        self.paceOf = pace
    }

    /// Lines set aside until `pace` has a token (stale items included: an upper bound).
    public func waitingCount(pace: String) -> Int { paces[pace]?.parked.count ?? 0 }

    /// The pace named `key` as last given, if a head of it was ever due.
    public func pace(_ key: String) -> Pace? { paces[key]?.pace }

    /// Per pace: the heads handed out after waiting for a token, since the last call.
    public func takePacedSends() -> [String: Int] {
        var result: [String: Int] = [:]
        for (key, state) in paces where state.pacedSends > 0 {
            result[key] = state.pacedSends
            paces[key]?.pacedSends = 0
        }
        return result
    }

    /// Lines waiting for a token, per pace whose count changed since the last call (stale items included): what
    /// a gauge needs, without a new dictionary on every turn of the send loop while nothing changes.
    public func takeWaitingForPaceChanges() -> [String: Int] {
        var changed: [String: Int] = [:]
        for (key, state) in paces where state.parked.count != state.reportedWaiting {
            changed[key] = state.parked.count
            paces[key]?.reportedWaiting = state.parked.count
        }
        return changed
    }

    /// Heads in flight through `gate`.
    public func inFlight(gate: String) -> Int { gates[gate]?.inFlight ?? 0 }

    /// Lines set aside until `gate` frees a place (stale items included).
    public func parkedCount(gate: String) -> Int { gates[gate]?.parked.count ?? 0 }

    /// Subscriptions with at least one pending notification.
    public var subscriptionCount: Int { lines.count }

    public var isEmpty: Bool { lines.isEmpty }

    /// Every subscription with pending notifications.
    public var keys: [RetryKey] { Array(lines.keys) }

    /// True when `key` has pending notifications.
    public func hasPending(for key: RetryKey) -> Bool { lines[key] != nil }

    /// True when `key`'s head is in flight.
    public func isInFlight(_ key: RetryKey) -> Bool { lines[key]?.inFlight ?? false }

    /// True when `key`'s head has failed at least once (its line is then kept in the state topic).
    public func isBackingOff(_ key: RetryKey) -> Bool { lines[key]?.isBackingOff ?? false }

    /// The pending notifications of `key`, head first.
    public func pending(for key: RetryKey) -> [PendingNotification] { lines[key]?.entries ?? [] }

    /// The end of the pause of `scope`, if one was set (it may be over).
    public func pausedUntil(scope: String) -> Double? { pauses[ExactString(scope)] }

    /// The holds of entries that left the queue without being handed out since the last call.
    public func takeReleasedHolds() -> [UInt64] {
        defer { released = [] }
        return released
    }

    /// Takes the holds of every entry of `key`'s line (its line was stored: nothing needs to wait for it
    /// any more).
    public func takeHolds(forSubscription key: RetryKey) -> [UInt64] {
        guard var line = lines[key] else { return [] }
        var holds: [UInt64] = []
        for index in line.entries.indices where !line.entries[index].holds.isEmpty {
            holds += line.entries[index].holds
            line.entries[index].holds = []
        }
        if !holds.isEmpty { lines[key] = line }
        return holds
    }

    // MARK: Enqueue

    /// Adds a notification at the end of its subscription's line, coalescing with the last entry when the
    /// subscription is backing off.
    @discardableResult
    public func enqueue(_ notification: PendingNotification) -> EnqueueOutcome {
        let key = notification.key
        // Taken out of the dictionary while it changes, so that its entries are not copied (a long line would be
        // copied whole by each append). Every path below puts it back, or drops it when empty.
        guard var line = lines.removeValue(forKey: key) else {
            lines[key] = Line(entries: [notification])
            count += 1
            schedule(key)
            return .queued
        }
        let lastIndex = line.entries.count - 1
        // The in-flight head is being sent as it is: never coalesce into it.
        guard line.isBackingOff, !notification.isRevoke, lastIndex > 0 || !line.inFlight, let last = line.entries.last,
            !last.isRevoke
        else {
            line.entries.append(notification)
            count += 1
            lines[key] = line
            return .queued
        }
        switch last.content.coalescing(with: notification.content) {
        case .keepBoth:
            line.entries.append(notification)
            count += 1
            lines[key] = line
            return .queued
        case .combined(let content):
            var merged = Self.inheriting(notification, scheduleOf: last)
            merged.content = content
            merged.holds = last.holds + notification.holds
            if content != notification.content { merged.payload = nil }
            line.entries[lastIndex] = merged
            lines[key] = line
            if lastIndex == 0 { schedule(key) }  // the head's scope may have changed
            return .coalesced
        case .cancelled:
            released += last.holds + notification.holds
            line.entries.removeLast()
            count -= 1
            lines[key] = line.entries.isEmpty ? nil : line
            return .cancelled
        }
    }

    // MARK: Delivery

    /// The heads that may be sent at `now` (their `notBefore` reached, their scope not paused, not already in
    /// flight), earliest first, at most `limit`. Each is marked in flight until `completed` or `failed`.
    public func due(now: Double, limit: Int = .max) -> [PendingNotification] {
        var result: [PendingNotification] = []
        releasePaced(now: now, limit: limit)
        while result.count < limit, let top = heap.peek, top.time <= now {
            heap.pop()
            guard var line = lines[top.key], !line.inFlight, line.ticket == top.ticket, let head = line.entries.first
            else { continue }
            if let until = pauses[ExactString(head.scope)], until > now {
                heap.push(WakeUpHeap.Item(time: until, ticket: top.ticket, key: top.key))
                continue
            }
            if !line.paced, let pace = paceOf(head) {
                var state = paces.removeValue(forKey: pace.key) ?? PaceState(pace)
                state.update(pace)
                // Behind the lines already waiting for a token, in order; else it needs a token now.
                if state.parked.count > 0 || state.bucket.take(now: now) != .admitted {
                    state.parked.push(top)
                    paces[pace.key] = state
                    continue
                }
                paces[pace.key] = state
            }
            if let gate = gateOf(head) {
                var state = gates.removeValue(forKey: gate.key) ?? GateState()
                state.limit = gate.limit
                if state.inFlight >= gate.limit {
                    state.parked.push(top)
                    gates[gate.key] = state
                    continue
                }
                state.inFlight += 1
                gates[gate.key] = state
                line.gate = gate.key
            }
            line.inFlight = true
            line.paced = false
            lines[top.key] = line
            inFlightCount += 1
            result.append(head)
        }
        for (scope, until) in pauses where until <= now { pauses[scope] = nil }
        compactIfNeeded()
        return result
    }

    /// The in-flight head of `key` was delivered (or failed for good): removes and returns it; the next entry,
    /// if any, is due on its own schedule.
    @discardableResult
    public func completed(_ key: RetryKey) -> PendingNotification? {
        guard lines[key]?.inFlight == true, var line = lines.removeValue(forKey: key) else { return nil }
        let head = line.entries.removeFirst()
        line.inFlight = false
        line.headRemoved = false
        count -= 1
        inFlightCount -= 1
        leaveGate(&line)
        if line.entries.isEmpty {
            lines[key] = nil
        } else {
            lines[key] = line
            schedule(key)
        }
        return head
    }

    /// The in-flight head of `key` failed with a recoverable error at `now`: schedules its retry by `policy`,
    /// or, past the deadline, discards every pending notification of `key`.
    ///
    /// For a project-wide `QUOTA_EXCEEDED`, also call ``pause(scope:until:)``.
    public func failed(
        _ key: RetryKey, now: Double, retryAfter: Double? = nil, quotaExceeded: Bool = false,
        policy: RetryPolicy = .standard, random: inout some RandomNumberGenerator
    ) -> FailureOutcome {
        // Taken out while it changes (no copy of its entries); put back below, or dropped when empty.
        guard lines[key]?.inFlight == true, var line = lines.removeValue(forKey: key), var head = line.entries.first
        else { return .superseded }
        line.inFlight = false
        inFlightCount -= 1
        leaveGate(&line)
        if line.headRemoved {
            line.headRemoved = false
            released += line.entries.removeFirst().holds
            count -= 1
            if line.entries.isEmpty {
                lines[key] = nil
            } else {
                lines[key] = line
                schedule(key)
            }
            return .superseded
        }
        if head.attempt <= 0 { head.firstFailureAt = now }
        head.attempt = max(head.attempt, 0) + 1
        guard
            let at = policy.nextAttempt(
                firstFailureAt: head.firstFailureAt, now: now, attempt: head.attempt, retryAfter: retryAfter,
                quotaExceeded: quotaExceeded, random: &random)
        else {
            count -= line.entries.count
            lines[key] = nil
            return .discarded(line.entries)
        }
        head.notBefore = at
        line.entries[0] = head
        // The head is pending again: coalesce it with what was queued behind it while it was in flight.
        var superseded = false
        merging: while line.entries.count >= 2 {
            let first = line.entries[0]
            let next = line.entries[1]
            if next.isRevoke { break merging }
            switch first.content.coalescing(with: next.content) {
            case .keepBoth:
                break merging
            case .combined(let content):
                var merged = Self.inheriting(next, scheduleOf: first)
                merged.content = content
                merged.holds = first.holds + next.holds
                if content != next.content { merged.payload = nil }
                line.entries.removeFirst()
                line.entries[0] = merged
                count -= 1
            case .cancelled:
                released += first.holds + next.holds
                line.entries.removeFirst(2)
                count -= 2
                superseded = true
                if let following = line.entries.first {
                    line.entries[0] = Self.inheriting(following, scheduleOf: first)
                }
            }
        }
        guard let newHead = line.entries.first else {
            lines[key] = nil
            return .superseded
        }
        lines[key] = line
        let time = schedule(key)
        // When the failed notification cancelled out, what remains is other notifications under its schedule.
        return superseded ? .superseded : .scheduled(at: time ?? effectiveTime(of: newHead))
    }

    /// Holds back every notification of `scope` until `until` (a project-wide quota). Pauses only extend.
    public func pause(scope: String, until: Double) {
        guard !until.isNaN else { return }
        if let current = pauses[ExactString(scope)], current >= until { return }
        pauses[ExactString(scope)] = until
    }

    /// The earliest time at which `due` may return something, nil when nothing is pending outside flight.
    /// (Cleans stale heap items as it looks.)
    public var nextWakeUp: Double? {
        while let top = heap.peek {
            guard let line = lines[top.key], !line.inFlight, line.ticket == top.ticket, let head = line.entries.first
            else {
                heap.pop()
                continue
            }
            if let until = pauses[ExactString(head.scope)], until > top.time {
                heap.pop()
                heap.push(WakeUpHeap.Item(time: until, ticket: top.ticket, key: top.key))
                continue
            }
            return min(top.time, nextPaceToken ?? .infinity)
        }
        return nextPaceToken
    }

    /// The earliest next token of a pace with lines waiting for one.
    private var nextPaceToken: Double? {
        var next: Double?
        for state in paces.values where state.parked.count > 0 { next = min(next ?? .infinity, state.bucket.nextTokenAt) }
        return next
    }

    // MARK: Removal

    /// Removes the pending notifications of `key` (its token is dead, or its app moved to another replica);
    /// returns them. One in flight stays until resolved (it may still be delivered) and is not returned; it is
    /// not retried if it fails (its `failed` returns `.superseded`).
    @discardableResult
    public func removeAll(forSubscription key: RetryKey) -> [PendingNotification] {
        guard var line = lines[key] else { return [] }
        guard line.inFlight else {
            lines[key] = nil
            count -= line.entries.count
            // It may have been put back for a free place of its gate: another parked line takes it.
            if let head = line.entries.first, let gate = gateOf(head) { reopen(gate.key) }
            return line.entries
        }
        let removed = Array(line.entries[1...])
        line.entries.removeSubrange(1...)
        line.headRemoved = true
        count -= removed.count
        lines[key] = line
        return removed
    }

    /// Removes the pending notifications of every subscription matching `predicate`; returns them.
    /// O(subscriptions with pending notifications).
    @discardableResult
    public func removeAll(where predicate: (RetryKey) -> Bool) -> [PendingNotification] {
        var removed: [PendingNotification] = []
        for key in lines.keys where predicate(key) { removed += removeAll(forSubscription: key) }
        return removed
    }

    // MARK: Internals

    /// The scheduling fields of `earlier` given to a later notification that replaces it: its attempt and
    /// `notBefore`, and the earliest `firstFailureAt` (a provisional one, of a never-tried notification, does
    /// not shorten the deadline of one that failed).
    private static func inheriting(
        _ later: PendingNotification, scheduleOf earlier: PendingNotification
    ) -> PendingNotification {
        var result = later
        result.firstFailureAt =
            earlier.attempt > 0 && later.attempt <= 0
            ? earlier.firstFailureAt : min(earlier.firstFailureAt, later.firstFailureAt)
        result.attempt = earlier.attempt
        result.notBefore = earlier.notBefore
        return result
    }

    private func effectiveTime(of head: PendingNotification) -> Double {
        let notBefore = head.notBefore.isNaN ? -Double.infinity : head.notBefore
        guard let until = pauses[ExactString(head.scope)] else { return notBefore }
        return max(notBefore, until)
    }

    /// Pushes a fresh heap item for `key`'s head (invalidating older ones); returns its time.
    @discardableResult
    private func schedule(_ key: RetryKey) -> Double? {
        guard var line = lines[key], !line.inFlight, let head = line.entries.first else { return nil }
        nextTicket &+= 1
        line.ticket = nextTicket
        lines[key] = line
        let time = effectiveTime(of: head)
        heap.push(WakeUpHeap.Item(time: time, ticket: nextTicket, key: key))
        return time
    }

    /// The in-flight head of `line` is resolved: its gate's place is free (call before storing `line`).
    private func leaveGate(_ line: inout Line) {
        guard let key = line.gate else { return }
        line.gate = nil
        gates[key]?.inFlight -= 1
        reopen(key)
    }

    /// Puts the earliest parked lines of gate `key` back in the heap, as many as it has free places (skipping
    /// stale items); forgets the gate once it is idle. A line put back that finds the gate full again (another
    /// took the place) is parked again: more put back than needed costs a little, fewer could strand a line.
    private func reopen(_ key: String) {
        guard var state = gates.removeValue(forKey: key) else { return }
        var free = state.limit - state.inFlight
        while free > 0, let item = state.parked.pop() {
            guard let line = lines[item.key], !line.inFlight, line.ticket == item.ticket else { continue }
            heap.push(item)
            free -= 1
        }
        if state.inFlight > 0 || state.parked.count > 0 { gates[key] = state }
    }

    /// The earliest lines set aside by each pace take the tokens that came (at most `limit` in all) and are put
    /// back in the heap, where they are handed out before later lines; stale items are dropped.
    private func releasePaced(now: Double, limit: Int) {
        var budget = limit
        for key in paces.keys where budget > 0 && paces[key]?.parked.count ?? 0 > 0 {
            guard var state = paces.removeValue(forKey: key) else { continue }
            while budget > 0, let top = state.parked.peek {
                guard var line = lines[top.key], !line.inFlight, line.ticket == top.ticket, let head = line.entries.first
                else {
                    state.parked.pop()
                    continue
                }
                if let pace = paceOf(head), pace.key == key { state.update(pace) }  // a changed setting applies now
                guard state.bucket.take(now: now) == .admitted else { break }
                state.parked.pop()
                state.pacedSends += 1
                line.paced = true
                lines[top.key] = line
                heap.push(top)
                budget -= 1
            }
            paces[key] = state
        }
    }

    /// Rebuilds the heap when stale items outnumber live ones (keeps memory and pops bounded).
    private func compactIfNeeded() {
        guard heap.count > 64, heap.count > 4 * lines.count else { return }
        var items: [WakeUpHeap.Item] = []
        items.reserveCapacity(lines.count)
        for (key, line) in lines where !line.inFlight {
            if let head = line.entries.first {
                items.append(WakeUpHeap.Item(time: effectiveTime(of: head), ticket: line.ticket, key: key))
            }
        }
        heap = WakeUpHeap(items)
        // Every line outside flight is in the new heap: the parked ones are picked (and parked) again.
        for key in Array(gates.keys) {
            gates[key]?.parked = WakeUpHeap()
            if gates[key]?.inFlight == 0 { gates[key] = nil }
        }
        for key in Array(paces.keys) { paces[key]?.parked = WakeUpHeap() }
    }
}

/// A binary min-heap of wake-up times, ties broken by ticket (earlier scheduled first).
struct WakeUpHeap {
    struct Item {
        var time: Double
        var ticket: UInt64
        var key: RetryKey

        func precedes(_ other: Item) -> Bool { (time, ticket) < (other.time, other.ticket) }
    }

    private var items: [Item] = []

    init() {}

    init(_ unordered: [Item]) {
        items = unordered
        var index = items.count / 2
        while index > 0 {
            index -= 1
            siftDown(from: index)
        }
    }

    var count: Int { items.count }
    var peek: Item? { items.first }

    mutating func push(_ item: Item) {
        items.append(item)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].precedes(items[parent]) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func pop() -> Item? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let item = items.removeLast()
        siftDown(from: 0)
        return item
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < items.count else { return }
            var smallest = left
            let right = left + 1
            if right < items.count, items[right].precedes(items[left]) { smallest = right }
            guard items[smallest].precedes(items[parent]) else { return }
            items.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
