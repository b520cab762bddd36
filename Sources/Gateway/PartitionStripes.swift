import Synchronization

/// State kept per partition, each partition behind a lock of its own: partition p lives in stripe p % `count`, so
/// two partitions below `count` never wait for each other (a topic with more partitions shares stripes).
final class PartitionStripes<State: Sendable>: Sendable {
    private final class Stripe: Sendable {
        let entries = Mutex<[Int32: State]>([:])
    }

    private let stripes: [Stripe]

    init(count: Int = 1024) {
        stripes = (0..<max(1, count)).map { _ in Stripe() }
    }

    private func stripe(_ partition: Int32) -> Stripe {
        stripes[Int(UInt32(bitPattern: partition) % UInt32(stripes.count))]
    }

    /// Runs `body` on `partition`'s state (nil: none; setting it to nil forgets the partition) under its lock.
    func withLock<Result: Sendable>(_ partition: Int32, _ body: (inout State?) -> Result) -> Result {
        stripe(partition).entries.withLock { entries in body(&entries[partition]) }
    }

    /// Combines every partition's state, one stripe at a time (not a snapshot of all partitions at one instant).
    func reduce<Result: Sendable>(_ initial: Result, _ combine: (Result, State) -> Result) -> Result {
        stripes.reduce(initial) { result, stripe in
            stripe.entries.withLock { entries in entries.values.reduce(result, combine) }
        }
    }
}
