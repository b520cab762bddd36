/// Which subscriptions' pending-retry lines must be (re)written to the state topic, and the backoff of those
/// whose write failed.
///
/// - A changed line is marked (``markChanged(_:)``) and taken by the next ``takeReady(now:)``.
/// - A failed write (``failed(_:now:random:)``) is written again after a backoff: 0.5 s after the first failure,
///   doubling to 30 s, jittered (between half and the whole of it, so that lines that failed together do not
///   retry together). One chain per key: while a line waits, changes to it do not make it written sooner (it is
///   written from memory at its time, with them); each further failure of its writes doubles the delay.
/// - A stored write (``stored(_:)``) ends the chain, unless another write of the line failed after it was sent
///   and waits: that one is still written (it releases what waits for the failed one).
///
/// O(log n) per failure (a min-heap of times with lazy invalidation); ``takeReady(now:)`` is O(1) while nothing
/// is changed or due. Not thread-safe: the owner serialises access.
public struct RetryLineWrites {
    public static let firstDelay = 0.5
    public static let maxDelay = 30.0

    private struct Chain {
        /// Failed writes in a row.
        var failures: Int
        /// Waiting for its time (not yet taken for writing).
        var waiting: Bool
        /// When it is written again (while waiting).
        var at: Double
        /// Identifies the chain's valid heap item.
        var ticket: UInt64
    }

    /// Lines to write at the next ``takeReady(now:)``.
    private var changed: Set<RetryKey> = []
    private var chains: [RetryKey: Chain] = [:]
    private var heap = WakeUpHeap()
    private var nextTicket: UInt64 = 0

    public init() {}

    /// `key`'s line changed: it is written at the next ``takeReady(now:)``, or at the end of its backoff.
    public mutating func markChanged(_ key: RetryKey) {
        if chains[key]?.waiting == true { return }
        changed.insert(key)
    }

    /// The lines to write now: the changed ones and those whose backoff is over.
    public mutating func takeReady(now: Double) -> [RetryKey] {
        while let top = heap.peek, top.time <= now {
            heap.pop()
            guard var chain = chains[top.key], chain.waiting, chain.ticket == top.ticket else { continue }
            chain.waiting = false
            chains[top.key] = chain
            changed.insert(top.key)
        }
        guard !changed.isEmpty else { return [] }
        defer { changed = [] }
        return Array(changed)
    }

    /// A write of `key`'s line failed at `now`: it is written again at the returned time (by the backoff of its
    /// chain), not before.
    @discardableResult
    public mutating func failed(_ key: RetryKey, now: Double, random: inout some RandomNumberGenerator) -> Double {
        var chain = chains[key] ?? Chain(failures: 0, waiting: false, at: now, ticket: 0)
        if chain.waiting { return chain.at }  // one chain: a failure of an older write adds nothing
        chain.failures += 1
        let delay = Self.delay(afterFailures: chain.failures)
        let at = now + delay * Double.random(in: 0.5...1, using: &random)
        nextTicket &+= 1
        chain.ticket = nextTicket
        chain.waiting = true
        chain.at = at
        chains[key] = chain
        changed.remove(key)
        heap.push(WakeUpHeap.Item(time: at, ticket: nextTicket, key: key))
        return at
    }

    /// A write of `key`'s line was stored: its chain ends (unless a failed write of it waits).
    public mutating func stored(_ key: RetryKey) {
        guard chains[key]?.waiting == false else { return }
        chains[key] = nil
    }

    /// Forgets the lines matching `predicate` (their partition was given up).
    public mutating func removeAll(where predicate: (RetryKey) -> Bool) {
        changed = changed.filter { !predicate($0) }
        chains = chains.filter { !predicate($0.key) }
    }

    /// The end of the earliest backoff (stale items included: at worst an early wake-up), nil when none waits.
    public var nextWakeUp: Double? { heap.peek?.time }

    /// The delay before the next write after `failures` failures in a row, before jitter: 0.5 s doubling to 30 s.
    public static func delay(afterFailures failures: Int) -> Double {
        min(maxDelay, firstDelay * Double(1 << min(max(failures - 1, 0), 16)))
    }
}
