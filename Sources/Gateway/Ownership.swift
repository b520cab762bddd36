import KafkaClient
import Synchronization

/// Which apps this replica owns: those whose change partition (computed with the publishers' partitioner)
/// the consumer group assigned to it.
public final class Ownership: Sendable {
    private let partitioner: KeyPartitioner
    private let state = Mutex<(partitionCount: Int32, owned: Set<Int32>)>((0, []))

    public init(partitioner: KeyPartitioner) { self.partitioner = partitioner }

    func setPartitionCount(_ count: Int32) {
        state.withLock { $0.partitionCount = count }
        changes.add(1, ordering: .releasing)
    }
    /// Bumped whenever the owned partitions change, so that services can notice a takeover cheaply.
    private let changes = Atomic<UInt64>(0)
    var generation: UInt64 { changes.load(ordering: .acquiring) }

    func assigned(_ partitions: [Int32]) {
        state.withLock { $0.owned.formUnion(partitions) }
        changes.add(1, ordering: .releasing)
    }
    func revoked(_ partitions: [Int32]) {
        state.withLock { $0.owned.subtract(partitions) }
        changes.add(1, ordering: .releasing)
    }

    public var partitionCount: Int32 { state.withLock { $0.partitionCount } }

    /// The change partition of `app`, -1 while the partition count is unknown.
    public func partition(of app: String) -> Int32 {
        let count = partitionCount
        return count > 0 ? partitioner.partition(of: Array(app.utf8), partitions: count) : -1
    }

    /// True when the app's events are consumed here.
    public func owns(app: String) -> Bool {
        let (count, owned) = state.withLock { ($0.partitionCount, $0.owned) }
        guard count > 0, !owned.isEmpty else { return false }
        return owned.contains(partitioner.partition(of: Array(app.utf8), partitions: count))
    }
}
