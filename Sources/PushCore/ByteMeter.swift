import Synchronization

/// A running total of estimated heap bytes (``AppIndex/byteCount``), shared by the indexes of a partition and
/// summed up a chain of meters: an app's meter adds into its partition's, which adds into the replica's. Every
/// change is a delta (O(1), no scan); an index gives its bytes back when it is freed.
///
/// Reservations: a write that will create state reserves its estimated bytes first, atomically against a
/// limit, so that two concurrent writes cannot both pass the last bytes of a budget; it releases them once its
/// record is applied (the bytes are then counted by the index) or refused.
public final class ByteMeter: Sendable {
    public let parent: ByteMeter?
    private let stored = Atomic<Int>(0)
    private let held = Atomic<Int>(0)

    public init(parent: ByteMeter? = nil) { self.parent = parent }

    /// Estimated bytes held (this meter and every meter that adds into it).
    public var bytes: Int { stored.load(ordering: .relaxed) }

    /// Bytes reserved by writes in flight at this level.
    public var reserved: Int { held.load(ordering: .relaxed) }

    /// Adds `delta` (negative: freed) here and up the chain.
    public func add(_ delta: Int) {
        guard delta != 0 else { return }
        var meter: ByteMeter? = self
        while let current = meter {
            current.stored.add(delta, ordering: .relaxed)
            meter = current.parent
        }
    }

    /// Reserves `count` bytes at this level when `bytes + reserved + count <= limit` (a limit of 0 or less:
    /// none). Atomic against other reservations. False: it would pass the limit; nothing is reserved.
    public func reserve(_ count: Int, limit: Int) -> Bool {
        guard limit > 0 else {
            held.add(count, ordering: .relaxed)
            return true
        }
        var current = held.load(ordering: .relaxed)
        while true {
            let (total, overflow) = bytes.addingReportingOverflow(current)
            guard !overflow, total <= limit - count else { return false }
            let (exchanged, original) = held.compareExchange(
                expected: current, desired: current + count, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
    }

    /// Gives back bytes reserved with ``reserve(_:limit:)``.
    public func release(_ count: Int) {
        guard count != 0 else { return }
        held.subtract(count, ordering: .relaxed)
    }
}
