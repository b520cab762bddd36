import Dispatch
import Foundation

/// The threads that match change records: partition `p` always runs on worker `p % count`, so a partition's
/// records are matched one at a time and in their order, while different partitions run in parallel (both
/// cores busy), each behind its own partition lock.
///
/// The poll thread is the only one that gives them work, and waits for all of them (``barrier()``) before a
/// rebalance: as when it matched records itself, no record is being matched while partitions change hands.
/// The state store's reader has workers of its own (``init(count:label:maxQueued:)`` with a bound): it waits in
/// ``run(on:_:)`` while that many works are queued, so reading never runs far ahead of applying.
final class PartitionWorkers: Sendable {
    private let queues: [DispatchQueue]
    /// Free places for queued works; nil: unbounded.
    private let places: DispatchSemaphore?

    /// `count` workers (0: one per core) named `label-N`; `maxQueued`: most works given and not finished, after
    /// which ``run(on:_:)`` waits (nil: never waits).
    init(count: Int, label: String = "partition-worker", maxQueued: Int? = nil) {
        let workers = count > 0 ? count : max(1, ProcessInfo.processInfo.activeProcessorCount)
        queues = (0..<workers).map { DispatchQueue(label: "\(label)-\($0)", qos: .userInitiated) }
        places = maxQueued.map { DispatchSemaphore(value: max(1, $0)) }
    }

    var count: Int { queues.count }

    /// Runs `work` on `partition`'s worker, after the work given to it before; with a bound, first waits for a
    /// free place.
    func run(on partition: Int32, _ work: @escaping @Sendable () -> Void) {
        let queue = queues[Int(partition.magnitude) % queues.count]
        guard let places else { return queue.async(execute: work) }
        places.wait()
        queue.async {
            work()
            places.signal()
        }
    }

    /// Returns once every work given before the call has finished.
    func barrier() {
        for queue in queues { queue.sync {} }
    }
}
