import GatewayCore
import KafkaClient
import PushCore

/// What a ``PartitionState`` needs from outside: reading a range of its log back (``GapVerdict``), being told
/// apart when it is superseded, rewriting a pending-retry line, releasing an event's ticket, reporting an ended
/// subscription.
struct PartitionHooks: Sendable {
    /// Reads the records of the partition at offsets `from..<to` (blocking; nil when it cannot now).
    var readRange: @Sendable (_ partition: Int32, _ from: Int64, _ to: Int64) -> [KafkaRecord]? = { _, _, _ in [] }
    /// Another owner took the partition: this replica stops consuming and serving it.
    var fenced: @Sendable (_ partition: Int32) -> Void = { _ in }
    /// A superseded record rewrote this subscription's pending-retry line: write it again as memory has it.
    var rewriteRetryLine: @Sendable (_ key: RetryKey) -> Void = { _ in }
    /// A change event's ticket is released by a write it waited for (``EventTickets/release(_:)``).
    var releaseTicket: @Sendable (_ ticket: UInt64) -> Void = { _ in }
    /// A subscription ended (revoked, or its token dead) and its tombstone is stored: queued for its app's event
    /// hook (``EventHookService``). Called while the partition's ordered actions are issued (one thread at a time), in the order of the
    /// tombstones: it must only queue.
    var subscriptionEnded: @Sendable (_ ended: EndedSubscription) -> Void = { _ in }
    var metrics: GatewayMetrics? = nil
    /// How long a confirmation of ownership stays current for sending notifications (nanoseconds).
    var lease: UInt64 = 1_000_000_000
}
