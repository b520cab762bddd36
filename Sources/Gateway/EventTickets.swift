import Synchronization

/// The change events whose work is not finished: each keeps its partition's committed offset from passing it
/// until every part of its work (each notification delivered or stored for retry, each state write
/// acknowledged) has released it. Parts hold the ticket by id (``PushCore/PendingNotification/holds``).
final class EventTickets: Sendable {
    private struct Ticket: Sendable {
        /// Nil: the change topic; else the companion topic it was read from (user notifications).
        var topic: String?
        var offset: Int64
        var remaining: Int
    }

    /// One partition's open tickets (change and companion topics).
    private struct PartitionTickets: Sendable {
        var next: UInt64 = 0
        var open: [UInt64: Ticket] = [:]
    }

    /// A ticket id is its partition (high bits) and its number within the partition (low bits), so a release finds
    /// the partition's lock without a lock shared by every partition.
    private static let numberBits: UInt64 = 40
    private static let numberMask: UInt64 = (1 << numberBits) - 1

    private let partitions = PartitionStripes<PartitionTickets>()
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

    /// The partition a ticket id belongs to (partitions below 2^24, Kafka's are far fewer).
    private static func partition(of id: UInt64) -> Int32 { Int32(truncatingIfNeeded: id >> numberBits) }

    /// A ticket for the record at `offset`, held once by its processing (release it when that is done). `topic`:
    /// nil for the change topic, else the companion topic (its partition p is abandoned with change partition p).
    func open(partition: Int32, offset: Int64, topic: String? = nil) -> UInt64 {
        partitions.withLock(partition) { entry in
            if entry == nil { entry = PartitionTickets() }
            let number = (entry?.next ?? 0) % Self.numberMask + 1  // 1...numberMask, then again from 1
            entry?.next = number
            let id = UInt64(UInt32(bitPattern: partition)) << Self.numberBits | number
            entry?.open[id] = Ticket(topic: topic, offset: offset, remaining: 1)
            return id
        }
    }

    /// `count` more parts hold the ticket.
    func retain(_ id: UInt64, count: Int = 1) {
        guard count > 0 else { return }
        partitions.withLock(Self.partition(of: id)) { $0?.open[id]?.remaining += count }
    }

    /// Each id in `ids` releases one hold (ids of abandoned tickets are ignored).
    func release(_ ids: [UInt64]) {
        guard !ids.isEmpty else { return }
        var finished: [(String?, Int32, Int64)] = []
        for id in ids {
            let partition = Self.partition(of: id)
            let done = partitions.withLock(partition) { entry -> Ticket? in
                guard var ticket = entry?.open[id] else { return nil }
                ticket.remaining -= 1
                entry?.open[id] = ticket.remaining <= 0 ? nil : ticket
                return ticket.remaining <= 0 ? ticket : nil
            }
            if let done { finished.append((done.topic, partition, done.offset)) }
        }
        for (topic, partition, offset) in finished { onFinished(topic, partition, offset) }
    }

    func release(_ id: UInt64) { release([id]) }

    /// Forgets the open tickets of `partitions` (taken away from this replica: their events are consumed again
    /// by the new owner); returns how many were open.
    func abandon(partitions: Set<Int32>) -> Int {
        partitions.reduce(0) { count, partition in
            count + self.partitions.withLock(partition) { entry in
                // The numbering goes on: an abandoned ticket's id is never given to a new ticket.
                defer { entry?.open = [:] }
                return entry?.open.count ?? 0
            }
        }
    }

    /// Whether ticket `id` is still open (not finished, not abandoned with its partition).
    func isOpen(_ id: UInt64) -> Bool { partitions.withLock(Self.partition(of: id)) { $0?.open[id] != nil } }

    /// Open tickets of `partition`.
    func openCount(partition: Int32) -> Int { partitions.withLock(partition) { $0?.open.count ?? 0 } }
}
