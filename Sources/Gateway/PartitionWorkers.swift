import Dispatch
import Foundation

/// The threads that match change records: partition `p` always runs on worker `p % count`, so a partition's
/// records are matched one at a time and in their order, while different partitions run in parallel (both
/// cores busy), each behind its own partition lock.
///
/// The poll thread is the only one that gives them work, and waits for all of them (``barrier()``) before a
/// rebalance: as when it matched records itself, no record is being matched while partitions change hands.
final class PartitionWorkers: Sendable {
    private let queues: [DispatchQueue]

    /// `count` workers; 0: one per core.
    init(count: Int) {
        let workers = count > 0 ? count : max(1, ProcessInfo.processInfo.activeProcessorCount)
        queues = (0..<workers).map { DispatchQueue(label: "partition-worker-\($0)", qos: .userInitiated) }
    }

    var count: Int { queues.count }

    /// Runs `work` on `partition`'s worker, after the work given to it before.
    func run(on partition: Int32, _ work: @escaping @Sendable () -> Void) {
        queues[Int(partition.magnitude) % queues.count].async(execute: work)
    }

    /// Returns once every work given before the call has finished.
    func barrier() {
        for queue in queues { queue.sync {} }
    }
}
