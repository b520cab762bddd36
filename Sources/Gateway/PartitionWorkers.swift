import Dispatch
import Foundation

/// The threads that match change records: partition `p` always runs on worker `p % count`, so a partition's
/// records are matched one at a time and in their order, while different partitions run in parallel (both
/// cores busy), each behind its own partition lock.
///
/// The poll thread is the only one that gives them work, and waits for all of them (``barrier()``) before a
/// rebalance: as when it matched records itself, no record is being matched while partitions change hands.
/// The state store's reader has workers of its own (``init(count:label:maxQueued:profiles:)`` with a bound): it waits in
/// ``run(on:_:)`` while that many works are queued, so reading never runs far ahead of applying.
final class PartitionWorkers: Sendable {
    /// What one worker keeps for the work it runs, with no lock: only that work touches it, and a worker runs one
    /// work at a time (its queue is serial). Work run with ``PartitionWorkers/run(on:withLocal:)`` gets its worker's.
    final class Local: @unchecked Sendable {
        /// This worker's reader of the app profiles (``AppProfiles/Reader``): the event path's lookups take no lock
        /// shared with other partitions' workers. Nil for workers that look no app up (the state store's).
        private let profiles: AppProfiles.Reader?

        fileprivate init(profiles: AppProfiles?) { self.profiles = profiles.map(AppProfiles.Reader.init) }

        /// `app`'s settings now (nil: not configured, or this worker has no profiles).
        func profile(_ app: String) -> AppProfile? { profiles?.profile(app) }

        /// How many times this worker's reader read the shared map (tests: once, then once per change seen).
        var profileRefreshes: Int { profiles?.refreshes ?? 0 }
    }

    private let queues: [DispatchQueue]
    private let locals: [Local]
    /// Free places for queued works; nil: unbounded.
    private let places: DispatchSemaphore?

    /// `count` workers (0: one per core) named `label-N`; `maxQueued`: most works given and not finished, after
    /// which ``run(on:_:)`` waits (nil: never waits); `profiles`: the app profiles each worker reads (``Local``).
    init(count: Int, label: String = "partition-worker", maxQueued: Int? = nil, profiles: AppProfiles? = nil) {
        let workers = count > 0 ? count : max(1, ProcessInfo.processInfo.activeProcessorCount)
        queues = (0..<workers).map { DispatchQueue(label: "\(label)-\($0)", qos: .userInitiated) }
        locals = (0..<workers).map { _ in Local(profiles: profiles) }
        places = maxQueued.map { DispatchSemaphore(value: max(1, $0)) }
    }

    var count: Int { queues.count }

    /// Runs `work` on `partition`'s worker, after the work given to it before; with a bound, first waits for a
    /// free place.
    func run(on partition: Int32, _ work: @escaping @Sendable () -> Void) {
        let queue = queues[worker(of: partition)]
        guard let places else { return queue.async(execute: work) }
        places.wait()
        queue.async {
            work()
            places.signal()
        }
    }

    /// Runs `work` on `partition`'s worker as ``run(on:_:)`` does, with what that worker keeps (``Local``), to be
    /// used only inside `work`.
    func run(on partition: Int32, withLocal work: @escaping @Sendable (Local) -> Void) {
        let local = locals[worker(of: partition)]
        run(on: partition) { work(local) }
    }

    /// What `partition`'s worker keeps (tests, to read it after a ``barrier()``).
    func local(of partition: Int32) -> Local { locals[worker(of: partition)] }

    private func worker(of partition: Int32) -> Int { Int(partition.magnitude) % queues.count }

    /// Returns once every work given before the call has finished.
    func barrier() {
        for queue in queues { queue.sync {} }
    }
}
