import Synchronization

/// Which change partitions this replica owns, which of them are loaded (ready to serve), and which it gave up as
/// superseded: the one place these facts live. The change consumer changes them (assignments, revocations, loads,
/// fencing); `/readyz` (``Health``), the membership record and the request router read them.
final class PartitionOwnership: Sendable {
    struct Snapshot: Sendable, Equatable {
        /// Partitions the consumer group assigned here (and not given up since).
        var owned: Set<Int32> = []
        /// The owned partitions whose state is loaded.
        var ready: Set<Int32> = []
        /// Whether the group has assigned partitions (possibly none) at least once.
        var assignedOnce = false
    }

    private struct State {
        var snapshot = Snapshot()
        /// Given up because another owner wrote after this one, until the group revokes or assigns them again.
        var fenced: Set<Int32> = []
        var listeners: [@Sendable (Snapshot) -> Void] = []
    }

    private let state = Mutex(State())

    var snapshot: Snapshot { state.withLock { $0.snapshot } }
    var fenced: Set<Int32> { state.withLock { $0.fenced } }

    /// `listener` hears of every change of the snapshot (after it, outside the lock, in order per change).
    func onChange(_ listener: @escaping @Sendable (Snapshot) -> Void) {
        state.withLock { $0.listeners.append(listener) }
    }

    /// Assigned (or taken back): owned, not loaded yet.
    func take(_ partitions: Set<Int32>) {
        change { state in
            state.snapshot.assignedOnce = true
            state.snapshot.owned.formUnion(partitions)
            state.fenced.subtract(partitions)
        }
    }

    /// Revoked, or superseded when `fenced`: no longer owned.
    func forget(_ partitions: Set<Int32>, fenced: Bool) {
        change { state in
            state.snapshot.owned.subtract(partitions)
            state.snapshot.ready.subtract(partitions)
            if fenced { state.fenced.formUnion(partitions) } else { state.fenced.subtract(partitions) }
        }
    }

    /// Loaded: ready when still owned. Returns whether it is.
    @discardableResult
    func loaded(_ partition: Int32) -> Bool {
        var ready = false
        change { state in
            if state.snapshot.owned.contains(partition) { state.snapshot.ready.insert(partition) }
            ready = state.snapshot.ready.contains(partition)
        }
        return ready
    }

    private func change(_ body: (inout State) -> Void) {
        let (snapshot, listeners) = state.withLock { state -> (Snapshot?, [@Sendable (Snapshot) -> Void]) in
            let before = state.snapshot
            body(&state)
            return (state.snapshot == before ? nil : state.snapshot, state.listeners)
        }
        guard let snapshot else { return }
        for listener in listeners { listener(snapshot) }
    }
}
