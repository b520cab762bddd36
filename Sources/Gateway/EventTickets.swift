import Synchronization

/// The change events whose work is not finished: each keeps its partition's committed offset from passing it
/// until every part of its work (each notification delivered or stored for retry, each state write
/// acknowledged) has released it. Parts hold the ticket by id (``PushCore/PendingNotification/holds``).
final class EventTickets: Sendable {
    private struct Ticket {
        /// Nil: the change topic; else the companion topic it was read from (user notifications).
        var topic: String?
        var partition: Int32
        var offset: Int64
        var remaining: Int
    }

    private struct State {
        var next: UInt64 = 1
        var open: [UInt64: Ticket] = [:]
    }

    private let state = Mutex(State())
    private let onFinished: @Sendable (_ topic: String?, _ partition: Int32, _ offset: Int64) -> Void

    /// `onFinished` runs (outside the lock) when a ticket's last part is released; `topic` is nil for the change
    /// topic, else the companion topic the ticket was opened for.
    init(onFinished: @escaping @Sendable (_ topic: String?, _ partition: Int32, _ offset: Int64) -> Void) {
        self.onFinished = onFinished
    }

    /// Tickets of the change topic only.
    convenience init(onFinished: @escaping @Sendable (_ partition: Int32, _ offset: Int64) -> Void) {
        self.init(onFinished: { _, partition, offset in onFinished(partition, offset) })
    }

    /// A ticket for the record at `offset`, held once by its processing (release it when that is done). `topic`:
    /// nil for the change topic, else the companion topic (its partition p is abandoned with change partition p).
    func open(partition: Int32, offset: Int64, topic: String? = nil) -> UInt64 {
        state.withLock { state in
            let id = state.next
            state.next += 1
            state.open[id] = Ticket(topic: topic, partition: partition, offset: offset, remaining: 1)
            return id
        }
    }

    /// `count` more parts hold the ticket.
    func retain(_ id: UInt64, count: Int = 1) {
        guard count > 0 else { return }
        state.withLock { $0.open[id]?.remaining += count }
    }

    /// Each id in `ids` releases one hold (ids of abandoned tickets are ignored).
    func release(_ ids: [UInt64]) {
        guard !ids.isEmpty else { return }
        let finished = state.withLock { state -> [(String?, Int32, Int64)] in
            var finished: [(String?, Int32, Int64)] = []
            for id in ids {
                guard var ticket = state.open[id] else { continue }
                ticket.remaining -= 1
                if ticket.remaining <= 0 {
                    state.open[id] = nil
                    finished.append((ticket.topic, ticket.partition, ticket.offset))
                } else {
                    state.open[id] = ticket
                }
            }
            return finished
        }
        for (topic, partition, offset) in finished { onFinished(topic, partition, offset) }
    }

    func release(_ id: UInt64) { release([id]) }

    /// Forgets the open tickets of `partitions` (taken away from this replica: their events are consumed again
    /// by the new owner); returns how many were open.
    func abandon(partitions: Set<Int32>) -> Int {
        state.withLock { state in
            let gone = state.open.filter { partitions.contains($0.value.partition) }
            for id in gone.keys { state.open[id] = nil }
            return gone.count
        }
    }

    /// Whether ticket `id` is still open (not finished, not abandoned with its partition).
    func isOpen(_ id: UInt64) -> Bool { state.withLock { $0.open[id] != nil } }

    /// Open tickets of `partition`.
    func openCount(partition: Int32) -> Int {
        state.withLock { state in state.open.values.reduce(0) { $0 + ($1.partition == partition ? 1 : 0) } }
    }
}
