import Providers
import PushCore

/// The event hook's queues (docs/DELIVERY.md, "The app's event hook"): one FIFO line per app, at most one event
/// of a line in flight, so an app's backend receives its events in the order they were reported; a failed head
/// stays at the head and backs off (``RetryPolicy``: from 1 s, `Retry-After` honoured, up to 2 hours after its
/// first failure, then it is given up). Each line holds at most the app's `eventHook.maxQueuedEvents`; a new
/// event beyond it is refused (the caller counts it). Pure: time is passed in; the owner serialises access.
struct EventHookQueue {
    struct Entry: Sendable, Equatable {
        var event: EventHookEvent
        /// When its first attempt failed (nil: none has).
        var firstFailureAt: Double?
        var failures = 0
        /// Not sent before this time.
        var notBefore: Double = 0
    }

    /// What became of a line's head after an attempt.
    enum Resolution: Sendable, Equatable {
        /// Accepted (2xx).
        case sent
        /// Refused for good (a 4xx other than 429, a refused address): dropped.
        case rejected(reason: String)
        /// Retried at this time.
        case retry(at: Double, reason: String)
        /// Its next attempt would land more than 2 hours after its first failure: dropped.
        case gaveUp(reason: String)
        /// The line was emptied meanwhile (its hook removed).
        case gone
    }

    private struct Line {
        var entries: [Entry] = []
        /// Index of the head in `entries` (the array is compacted as the head moves on).
        var head = 0
        var inFlight = false
        var count: Int { entries.count - head }

        mutating func popHead() {
            head += 1
            if head == entries.count {
                entries = []
                head = 0
            } else if head >= 64, head * 2 >= entries.count {
                entries.removeFirst(head)
                head = 0
            }
        }
    }

    private var lines: [String: Line] = [:]
    /// Events queued over all apps (in flight included).
    private(set) var count = 0

    /// Appends `event` to `app`'s line; false (nothing queued) when the line already holds `limit` events.
    mutating func enqueue(app: String, event: EventHookEvent, limit: Int) -> Bool {
        var line = lines[app, default: Line()]
        guard line.count < limit else { return false }
        line.entries.append(Entry(event: event))
        lines[app] = line
        count += 1
        return true
    }

    /// The heads due at `now` whose line has nothing in flight; each is marked in flight until ``finish(app:outcome:now:policy:random:)``.
    mutating func due(now: Double) -> [(app: String, entry: Entry)] {
        var due: [(app: String, entry: Entry)] = []
        for (app, line) in lines where !line.inFlight && line.count > 0 && line.entries[line.head].notBefore <= now {
            due.append((app, line.entries[line.head]))
            lines[app]?.inFlight = true
        }
        return due
    }

    /// The earliest time a head not in flight is due; nil when there is none.
    var nextWakeUp: Double? {
        lines.values.filter { !$0.inFlight && $0.count > 0 }.map { $0.entries[$0.head].notBefore }.min()
    }

    /// Events queued for `app` (in flight included).
    func count(app: String) -> Int { lines[app]?.count ?? 0 }

    /// Resolves `app`'s head in flight with the receiver's answer.
    mutating func finish(
        app: String, outcome: DeliveryOutcome, now: Double, policy: RetryPolicy, random: inout some RandomNumberGenerator
    ) -> Resolution {
        guard var line = lines[app], line.inFlight, line.count > 0 else { return .gone }
        line.inFlight = false
        defer { lines[app] = line.count > 0 ? line : nil }
        switch outcome {
        case .sent:
            line.popHead()
            count -= 1
            return .sent
        case .failed(let failure) where failure.classification == .retryable:
            var entry = line.entries[line.head]
            entry.failures += 1
            let first = entry.firstFailureAt ?? now
            entry.firstFailureAt = first
            guard
                let at = policy.nextAttempt(
                    firstFailureAt: first, now: now, attempt: entry.failures, retryAfter: failure.retryAfter, quotaExceeded: false,
                    random: &random)
            else {
                line.popHead()
                count -= 1
                return .gaveUp(reason: failure.reason)
            }
            entry.notBefore = at
            line.entries[line.head] = entry
            return .retry(at: at, reason: failure.reason)
        case .failed(let failure):
            // 4xx, 3xx, 410 (nothing to revoke: the hook is no subscription), a refused address.
            line.popHead()
            count -= 1
            return .rejected(reason: failure.reason)
        }
    }

    /// Drops `app`'s line (its hook was removed); returns how many events it held.
    mutating func removeAll(app: String) -> Int {
        let removed = lines.removeValue(forKey: app)?.count ?? 0
        count -= removed
        return removed
    }

    /// Drops every line; returns how many events they held.
    mutating func removeAll() -> Int {
        defer {
            lines = [:]
            count = 0
        }
        return count
    }
}
