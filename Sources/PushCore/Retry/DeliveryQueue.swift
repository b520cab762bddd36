import DequeModule

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
///   not due before the pause ends. A head's pause scope is given by the `pauseScope` function at init (by
///   default its ``PendingNotification/scope``).
/// - Deadline: when the head's next attempt would land after `firstFailureAt + deadline`, every pending entry
///   of the subscription is discarded (returned, so that the caller can settle what waits for them); the
///   subscription itself is not touched.
/// - Holds (``PendingNotification/holds``) of entries that leave the queue without being handed out
///   (merged away, cancelled, removed) are collected for the caller: ``takeReleasedHolds()``.
/// - Admissions (``Admission``, given by the `admissions` function at init): what a head needs before it is handed
///   out, each keyed (its ``Admission/ID``) and of one of two kinds: ``Admission/concurrency(_:)`` (at most
///   `limit` heads of the key in flight: one webhook destination host, one provider project's requests) and
///   ``Admission/rate(_:)`` (a token bucket: one provider project's send quota). A head is admitted by all it
///   needs or by none (a place and a token are taken together, never one while it waits for the other). A due
///   head that is refused (no place, no token, or lines of one of its keys waiting before it) is set aside in its
///   place in the order, by the key that refused it, without taking anything from `due`'s `limit`: it holds no
///   sending place while it waits, later heads of that key never overtake it, and the lines of other keys go on.
///   At each `due`, before anything else, the earliest set-aside lines of every key that has room again (a place
///   freed by a resolved head, a token that came) are admitted and handed out, in their order (a line that
///   another of its keys still refuses moves there, in its place, and the key's later lines wait behind it where
///   they are: each hand-out costs O(log n), never a move of every waiting line). ``nextWakeUp`` includes the time of a
///   waiting key's next token, or of its earliest waiting line when it has a free place. A resolved head
///   (delivered, failed, retried, removed) frees its places; a removed line that was waiting is skipped.
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
        /// A deque: the head leaves in O(1) (an array moved a long line's every entry on each delivery).
        var entries: Deque<PendingNotification>
        /// `entries[0]` was handed out by `due` and not resolved yet.
        var inFlight = false
        /// The in-flight head was removed (`removeAll`): drop it when resolved, do not retry it.
        var headRemoved = false
        /// Identifies the line's valid heap item (older items are stale).
        var ticket: UInt64 = 0
        /// The concurrency admissions the in-flight head holds a place of.
        var holding: [Admission.ID] = []
        /// The rate admission the head waited for a token of (counted as paced when it is handed out).
        var waitedForPace: Admission.ID?

        /// The subscription is backing off: its head has failed at least once.
        var isBackingOff: Bool { (entries.first?.attempt ?? 0) > 0 }
    }

    /// What a head needs before it is handed out (``DeliveryQueue``'s documentation): a place of a concurrency
    /// limit, or a token of a rate.
    public enum Admission: Sendable, Equatable {
        /// At most `limit` heads of the key in flight (a webhook destination host, a provider project's requests).
        case concurrency(Gate)
        /// Heads handed out at a rate (a provider project's send quota).
        case rate(Pace)

        public enum Kind: Sendable, Hashable {
            case concurrency
            case rate
        }

        /// Names an admission's state in the queue: one per kind and key.
        public struct ID: Sendable, Hashable {
            public var kind: Kind
            public var key: String

            public init(kind: Kind, key: String) {
                self.kind = kind
                self.key = key
            }
        }

        public var id: ID {
            switch self {
            case .concurrency(let gate): return ID(kind: .concurrency, key: gate.key)
            case .rate(let pace): return ID(kind: .rate, key: pace.key)
            }
        }
    }

    /// The concurrency kind of ``Admission``: lines that share a limit of heads in flight; `key` names it.
    public struct Gate: Sendable, Equatable {
        public var key: String
        public var limit: Int

        public init(key: String, limit: Int) {
            self.key = key
            self.limit = max(1, limit)
        }
    }

    /// The rate kind of ``Admission``: a send rate shared by lines: `rate` heads handed out per second,
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

    /// One admission's state: its rule as last given, the places taken (concurrency) or its token bucket (rate),
    /// and the heap items of the due lines it set aside.
    private struct AdmissionState {
        private(set) var admission: Admission
        /// Heads in flight that hold a place (concurrency).
        var inFlight = 0
        /// The token bucket (rate).
        private(set) var bucket: TokenBucket?
        var parked = WakeUpHeap()
        /// Heads handed out after waiting for a token, since the last ``takePacedSends()`` (rate).
        var pacedSends = 0
        /// `parked.count` as last returned by ``takeWaitingForPaceChanges()`` (rate).
        var reportedWaiting = 0
        /// The admission that refused its earliest set-aside line at its last turn (no room there, or earlier lines
        /// waiting there): its lines wait for that one's room (``DeliveryQueue/nextAdmission``), not for their own.
        var blockedBy: Admission.ID?

        init(_ admission: Admission) {
            self.admission = admission
            self.bucket = Self.bucket(of: admission)
        }

        private static func bucket(of admission: Admission) -> TokenBucket? {
            guard case .rate(let pace) = admission else { return nil }
            return TokenBucket(rate: pace.rate, burst: pace.burst)
        }

        /// Takes the admission as last given: a changed limit applies to the next hand-out, a changed rate starts
        /// a new, full bucket.
        mutating func update(_ given: Admission) {
            guard given != admission else { return }
            if case .rate = given { bucket = Self.bucket(of: given) }
            admission = given
        }

        /// True when one more head could be admitted at `now` (a free place, a token); takes nothing.
        func hasRoom(now: Double) -> Bool {
            switch admission {
            case .concurrency(let gate):
                return inFlight < gate.limit
            case .rate:
                guard var bucket else { return true }
                return bucket.take(now: now) == .admitted
            }
        }

        /// True when the head of `item` may be admitted at `now`: no line set aside here comes before it in the
        /// order (`item` nil: it was just taken from here, the earliest) and there is room (``hasRoom(now:)``).
        func mayAdmit(now: Double, item: WakeUpHeap.Item?) -> Bool {
            if let item, parked.hasItem(before: item) { return false }
            return hasRoom(now: now)
        }

        /// Takes a place or a token (``hasRoom(now:)`` said there is one).
        mutating func take(now: Double) {
            switch admission {
            case .concurrency: inFlight += 1
            case .rate: _ = bucket?.take(now: now)
            }
        }

        /// When its earliest set-aside line may be admitted: at its next token (rate), at once when it has a free
        /// place (concurrency); nil when none waits or it has no free place.
        var wakeUp: Double? {
            guard let top = parked.peek else { return nil }
            switch admission {
            case .concurrency(let gate): return inFlight < gate.limit ? top.time : nil
            case .rate: return bucket?.nextTokenAt
            }
        }

        /// When it has room: at once with a free place (concurrency), at its next token (rate); nil while its places
        /// are all taken (a resolved head wakes the queue's owner up).
        var roomAt: Double? {
            switch admission {
            case .concurrency(let gate): return inFlight < gate.limit ? -.infinity : nil
            case .rate: return bucket?.nextTokenAt ?? -.infinity
            }
        }

        /// Nothing in flight, nothing waiting: a concurrency state can be forgotten (a rate state keeps its bucket).
        var isIdle: Bool {
            guard case .concurrency = admission else { return false }
            return inFlight == 0 && parked.count == 0
        }
    }

    private var lines: [RetryKey: Line] = [:]
    private var heap = WakeUpHeap()
    private let admissionsOf: (PendingNotification) -> [Admission]
    private let pauseScopeOf: (PendingNotification) -> String
    private var admissions: [Admission.ID: AdmissionState] = [:]
    /// Admissions with set-aside lines (stale items included).
    private var waiting: Set<Admission.ID> = []
    /// Every rate admission (kept: their buckets and counters).
    private var rates: Set<Admission.ID> = []
    private var pauses: [ExactString: Double] = [:]
    private var nextTicket: UInt64 = 0
    private var released: [UInt64] = []

    /// Pending notifications, in flight included.
    public private(set) var count = 0
    /// Notifications handed out by `due` and not resolved yet.
    public private(set) var inFlightCount = 0

    /// - Parameters:
    ///   - admissions: what a head about to be handed out needs, none for nothing (asked at each hand-out, so a
    ///     changed limit or rate applies to the next one).
    ///   - pauseScope: the scope whose pause (``pause(scope:until:)``) holds a head back; asked only while a
    ///     pause is set.
    public init(
        admissions: @escaping (PendingNotification) -> [Admission] = { _ in [] },
        pauseScope: @escaping (PendingNotification) -> String = { $0.scope }
    ) {
        self.admissionsOf = admissions
        self.pauseScopeOf = pauseScope
    }

    /// Lines set aside until the rate (pace) `pace` has a token (stale items included: an upper bound).
    public func waitingCount(pace: String) -> Int { admissions[Admission.ID(kind: .rate, key: pace)]?.parked.count ?? 0 }

    /// The rate (pace) named `key` as last given, if a head of it was ever due.
    public func pace(_ key: String) -> Pace? {
        guard case .rate(let pace) = admissions[Admission.ID(kind: .rate, key: key)]?.admission else { return nil }
        return pace
    }

    /// Per rate (pace): the heads handed out after waiting for a token, since the last call.
    public func takePacedSends() -> [String: Int] {
        var result: [String: Int] = [:]
        for id in rates {
            guard let sends = admissions[id]?.pacedSends, sends > 0 else { continue }
            result[id.key] = sends
            admissions[id]?.pacedSends = 0
        }
        return result
    }

    /// Lines waiting for a token, per rate (pace) whose count changed since the last call (stale items
    /// included): what a gauge needs, without a new dictionary on every turn of the send loop while nothing
    /// changes.
    public func takeWaitingForPaceChanges() -> [String: Int] {
        var changed: [String: Int] = [:]
        for id in rates {
            guard let state = admissions[id], state.parked.count != state.reportedWaiting else { continue }
            changed[id.key] = state.parked.count
            admissions[id]?.reportedWaiting = state.parked.count
        }
        return changed
    }

    /// Heads in flight that hold a place of the concurrency admission (gate) `gate`.
    public func inFlight(gate: String) -> Int { admissions[Admission.ID(kind: .concurrency, key: gate)]?.inFlight ?? 0 }

    /// Lines set aside until the concurrency admission (gate) `gate` frees a place (stale items included).
    public func parkedCount(gate: String) -> Int { admissions[Admission.ID(kind: .concurrency, key: gate)]?.parked.count ?? 0 }

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
    public func pending(for key: RetryKey) -> [PendingNotification] { lines[key].map { Array($0.entries) } ?? [] }

    /// The end of the pause of `scope`, if one was set (it may be over).
    public func pausedUntil(scope: String) -> Double? { pauses.isEmpty ? nil : pauses[ExactString(scope)] }

    /// The end of the pause that holds `entry` back (that of its pause scope), if one was set (it may be over).
    public func pausedUntil(_ entry: PendingNotification) -> Double? {
        pauses.isEmpty ? nil : pauses[ExactString(pauseScopeOf(entry))]
    }

    /// The holds of entries that left the queue without being handed out since the last call.
    public func takeReleasedHolds() -> [UInt64] {
        defer { released = [] }
        return released
    }

    /// Takes the holds of every entry of `key`'s line (its line was stored: nothing needs to wait for it
    /// any more).
    public func takeHolds(forSubscription key: RetryKey) -> [UInt64] {
        // Taken out while it changes (no copy of its entries), and put back.
        guard var line = lines.removeValue(forKey: key) else { return [] }
        var holds: [UInt64] = []
        for index in line.entries.indices where !line.entries[index].holds.isEmpty {
            holds += line.entries[index].holds
            line.entries[index].holds = []
        }
        lines[key] = line
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
        admitWaiting(now: now, limit: limit, into: &result)
        while result.count < limit, let top = heap.pop(dueBy: now) {
            // The line is changed where it lies (one lookup; the line is not copied, nor written back).
            guard let index = lines.index(forKey: top.key) else { continue }
            offer(top, line: &lines.values[index], now: now, into: &result)
        }
        for (scope, until) in pauses where until <= now { pauses[scope] = nil }
        compactIfNeeded()
        return result
    }

    /// The in-flight head of `key` was delivered (or failed for good): removes and returns it; the next entry,
    /// if any, is due on its own schedule.
    @discardableResult
    public func completed(_ key: RetryKey) -> PendingNotification? {
        // Changed where it lies (one lookup, the line not copied); removed by its index when emptied.
        guard let index = lines.index(forKey: key), let done = complete(&lines.values[index]) else { return nil }
        count -= 1
        inFlightCount -= 1
        if done.emptied {
            lines.remove(at: index)
        } else {
            schedule(at: index, key)
        }
        return done.head
    }

    /// Takes the in-flight head out of `line` (delivered or failed for good) and frees its places; nil when no
    /// head is in flight.
    private func complete(_ line: inout Line) -> (head: PendingNotification, emptied: Bool)? {
        guard line.inFlight else { return nil }
        line.inFlight = false
        line.headRemoved = false
        let head = line.entries.removeFirst()
        releaseAdmissions(&line)
        return (head, line.entries.isEmpty)
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
        releaseAdmissions(&line)
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
            return .discarded(Array(line.entries))
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
            if let until = pausedUntil(head), until > top.time {
                heap.pop()
                heap.push(WakeUpHeap.Item(time: until, ticket: top.ticket, key: top.key))
                continue
            }
            return min(top.time, nextAdmission ?? .infinity)
        }
        return nextAdmission
    }

    /// The earliest time a set-aside line may be admitted (``AdmissionState/wakeUp``).
    /// A key whose earliest line another key refused waits for that one's room (at once when that one is gone).
    private var nextAdmission: Double? {
        var next: Double?
        for id in waiting {
            guard let state = admissions[id] else { continue }
            let time: Double?
            if let blocker = state.blockedBy {
                time = admissions[blocker].map(\.roomAt) ?? -.infinity
            } else {
                time = state.wakeUp
            }
            if let time { next = min(next ?? .infinity, time) }
        }
        return next
    }

    // MARK: Removal

    /// Removes the pending notifications of `key` (its token is dead, or its app moved to another replica);
    /// returns them. One in flight stays until resolved (it may still be delivered) and is not returned; it is
    /// not retried if it fails (its `failed` returns `.superseded`).
    @discardableResult
    public func removeAll(forSubscription key: RetryKey) -> [PendingNotification] {
        // Taken out while it changes (no copy of its entries); put back below when its head is in flight.
        guard var line = lines.removeValue(forKey: key) else { return [] }
        guard line.inFlight else {
            count -= line.entries.count
            // Set aside, it holds nothing: its item is stale, skipped when its admission admits the next line.
            return Array(line.entries)
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

    /// When `head` may be sent: its `notBefore`, or the end of its scope's pause when later.
    private func effectiveTime(of head: PendingNotification) -> Double {
        effectiveTime(notBefore: head.notBefore, pausedUntil: pausedUntil(head))
    }

    private func effectiveTime(notBefore: Double, pausedUntil: Double?) -> Double {
        let notBefore = notBefore.isNaN ? -Double.infinity : notBefore
        guard let pausedUntil else { return notBefore }
        return max(notBefore, pausedUntil)
    }

    /// Pushes a fresh heap item for `key`'s head (invalidating older ones); returns its time.
    @discardableResult
    private func schedule(_ key: RetryKey) -> Double? {
        guard let index = lines.index(forKey: key) else { return nil }
        return schedule(at: index, key)
    }

    /// ``schedule(_:)`` of the line at `index` (whose key is `key`).
    @discardableResult
    private func schedule(at index: [RetryKey: Line].Index, _ key: RetryKey) -> Double? {
        // Changed where it lies (the line is not copied).
        guard let time = reschedule(&lines.values[index]) else { return nil }
        heap.push(WakeUpHeap.Item(time: time, ticket: nextTicket, key: key))
        return time
    }

    /// Gives `line`, when it is not in flight, the next ticket (older heap items become stale); returns when its
    /// head may be sent.
    private func reschedule(_ line: inout Line) -> Double? {
        guard !line.inFlight, let notBefore = line.entries.first?.notBefore else { return nil }
        nextTicket &+= 1
        line.ticket = nextTicket
        line.waitedForPace = nil
        // The head's pause scope is asked only while a pause is set (it is then copied for the function).
        let paused = pauses.isEmpty ? nil : line.entries.first.flatMap(pausedUntil)
        return effectiveTime(notBefore: notBefore, pausedUntil: paused)
    }

    /// The heap item `top` of `line` is due at `now`: hands its head out when it is valid, not paused and admitted
    /// (else the line waits for its pause or its admission, or the item was stale).
    private func offer(_ top: WakeUpHeap.Item, line: inout Line, now: Double, into result: inout [PendingNotification]) {
        guard !line.inFlight, line.ticket == top.ticket, let head = line.entries.first else { return }
        if let until = pausedUntil(head), until > now {
            heap.push(WakeUpHeap.Item(time: until, ticket: top.ticket, key: top.key))
            return
        }
        let needed = admissionsOf(head)
        if needed.isEmpty || admit(top, line: &line, needing: needed, now: now, releasedBy: nil) == nil {
            handOut(head, line: &line, into: &result)
        }
    }

    /// Marks `head` (the head of `line`) in flight and adds it to `result`.
    private func handOut(_ head: PendingNotification, line: inout Line, into result: inout [PendingNotification]) {
        if let paced = line.waitedForPace {
            admissions[paced]?.pacedSends += 1
            line.waitedForPace = nil
        }
        line.inFlight = true
        inFlightCount += 1
        result.append(head)
    }

    /// Admits the line of `item` (its head needs `needed`) at `now`, by all its admissions or by none: nil when
    /// every one has room and none has lines waiting before it in the order (`item` was just taken from
    /// `releasedBy`, its earliest), and then a place or token of each is taken; else the first that refused it,
    /// which sets the line aside in its place in the order.
    private func admit(
        _ item: WakeUpHeap.Item, line: inout Line, needing needed: [Admission], now: Double, releasedBy: Admission.ID?
    ) -> Admission.ID? {
        // Each state looked up once and changed where it lies (not copied out and written back).
        var indices: [[Admission.ID: AdmissionState].Index] = []
        indices.reserveCapacity(needed.count)
        for admission in needed {
            let id = admission.id
            let index: [Admission.ID: AdmissionState].Index
            if let found = admissions.index(forKey: id) {
                index = found
                admissions.values[index].update(admission)
            } else {
                admissions[id] = AdmissionState(admission)
                if id.kind == .rate { rates.insert(id) }
                guard let inserted = admissions.index(forKey: id) else { continue }
                index = inserted
                // An insert may move the others (only at an admission's first head): look them up again.
                indices = needed[..<indices.count].compactMap { admissions.index(forKey: $0.id) }
            }
            if !admissions.values[index].mayAdmit(now: now, item: id == releasedBy ? nil : item) {
                admissions.values[index].parked.push(item)
                // Its earliest line may be this one now: what blocked the earlier one is asked again at its turn.
                admissions.values[index].blockedBy = nil
                waiting.insert(id)
                if id.kind == .rate { line.waitedForPace = id }
                return id
            }
            indices.append(index)
        }
        for index in indices {
            admissions.values[index].take(now: now)
            if admissions.keys[index].kind == .concurrency { line.holding.append(admissions.keys[index]) }
        }
        return nil
    }

    /// The in-flight head of `line` is resolved: its places are free (call before storing `line`); a concurrency
    /// admission left idle is forgotten.
    private func releaseAdmissions(_ line: inout Line) {
        for id in line.holding {
            guard let index = admissions.index(forKey: id) else { continue }
            admissions.values[index].inFlight -= 1
            if admissions.values[index].isIdle { admissions.remove(at: index) }
        }
        // Its buffer kept for the line's next head.
        line.holding.removeAll(keepingCapacity: true)
    }

    /// The earliest set-aside lines of each admission that has room again (a freed place, a token that came) are
    /// admitted and handed out (at most `limit` in `result`), in their order; one that another of its admissions
    /// refuses is set aside there, and ends the admission's turn; one whose scope is paused goes back to the heap
    /// until the pause ends; stale items are dropped.
    private func admitWaiting(now: Double, limit: Int, into result: inout [PendingNotification]) {
        guard !waiting.isEmpty else { return }
        for id in Array(waiting) {
            admissions[id]?.blockedBy = nil
            while result.count < limit, let top = admissions[id]?.parked.peek {
                guard var line = lines[top.key], !line.inFlight, line.ticket == top.ticket, let head = line.entries.first
                else {
                    admissions[id]?.parked.pop()
                    continue
                }
                let needed = admissionsOf(head)
                // A changed setting applies now (a new rate starts a new, full bucket).
                for admission in needed where admission.id == id { admissions[id]?.update(admission) }
                guard admissions[id]?.hasRoom(now: now) ?? true || !needed.contains(where: { $0.id == id }) else { break }
                admissions[id]?.parked.pop()
                if let until = pausedUntil(head), until > now {
                    heap.push(WakeUpHeap.Item(time: until, ticket: top.ticket, key: top.key))
                    continue
                }
                let refuser = needed.isEmpty ? nil : admit(top, line: &line, needing: needed, now: now, releasedBy: id)
                if refuser == nil { handOut(head, line: &line, into: &result) }
                lines[top.key] = line
                // Refused by another of its admissions (no room there, or earlier lines wait there): it waits there
                // now, and the later lines set aside here stay (they come after it). Moving them all over, to move
                // them all back when the other refuses no more, cost O(n log n) each time the binding one changed.
                if let refuser {
                    admissions[id]?.blockedBy = refuser
                    break
                }
            }
            guard let state = admissions[id] else {
                waiting.remove(id)
                continue
            }
            if state.parked.count == 0 {
                admissions[id]?.blockedBy = nil
                waiting.remove(id)
                if state.isIdle { admissions[id] = nil }
            }
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
        // Every line outside flight is in the new heap: the set-aside ones are picked (and set aside) again.
        for id in waiting {
            admissions[id]?.parked = WakeUpHeap()
            admissions[id]?.blockedBy = nil
            if admissions[id]?.isIdle == true { admissions[id] = nil }
        }
        waiting = []
    }
}

/// A binary min-heap of wake-up times, ties broken by ticket (earlier scheduled first).
///
/// Items are compared by their time and ticket where they lie, and moved, never copied (issue 19): an item holds a
/// ``RetryKey`` (four references), so a copy per comparison was four retains and releases, and showed in profiles.
struct WakeUpHeap {
    struct Item {
        var time: Double
        var ticket: UInt64
        var key: RetryKey
    }

    private var items: [Item] = []

    init() {}

    init(_ unordered: [Item]) {
        items = unordered
        items.withUnsafeMutableBufferPointer { buffer in
            var index = buffer.count / 2
            while index > 0 {
                index -= 1
                Self.siftDown(buffer, from: index)
            }
        }
    }

    var count: Int { items.count }
    var peek: Item? { items.first }

    /// True when the earliest item comes before `item` in the order (read in place).
    func hasItem(before item: Item) -> Bool {
        items.withUnsafeBufferPointer { buffer in
            !buffer.isEmpty && Self.precedes(buffer[0].time, buffer[0].ticket, item.time, item.ticket)
        }
    }
    /// The earliest item's time (nothing copied).
    var earliestTime: Double? { items.isEmpty ? nil : items.withUnsafeBufferPointer { $0[0].time } }

    mutating func push(_ item: Item) {
        items.append(item)
        items.withUnsafeMutableBufferPointer { buffer in
            var child = buffer.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard Self.precedes(buffer, child, parent) else { break }
                buffer.swapAt(child, parent)
                child = parent
            }
        }
    }

    @discardableResult
    mutating func pop() -> Item? {
        guard !items.isEmpty else { return nil }
        items.withUnsafeMutableBufferPointer { $0.swapAt(0, $0.count - 1) }
        let item = items.removeLast()
        items.withUnsafeMutableBufferPointer { Self.siftDown($0, from: 0) }
        return item
    }

    /// Takes out the earliest item when its time is at most `time`.
    mutating func pop(dueBy time: Double) -> Item? {
        guard let earliest = earliestTime, earliest <= time else { return nil }
        return pop()
    }

    /// `(time, ticket)` of item `i` before that of item `j`, read in place.
    private static func precedes(_ buffer: UnsafeMutableBufferPointer<Item>, _ i: Int, _ j: Int) -> Bool {
        precedes(buffer[i].time, buffer[i].ticket, buffer[j].time, buffer[j].ticket)
    }

    /// The heap's order: by time, ties broken by ticket.
    private static func precedes(_ time: Double, _ ticket: UInt64, _ otherTime: Double, _ otherTicket: UInt64) -> Bool {
        time != otherTime ? time < otherTime : ticket < otherTicket
    }

    private static func siftDown(_ buffer: UnsafeMutableBufferPointer<Item>, from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < buffer.count else { return }
            var smallest = left
            let right = left + 1
            if right < buffer.count, precedes(buffer, right, left) { smallest = right }
            guard precedes(buffer, smallest, parent) else { return }
            buffer.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
