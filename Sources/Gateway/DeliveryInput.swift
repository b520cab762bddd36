import PushCore

/// Where notifications go to be delivered (``DeliveryService``). The change-event path feeds it today; a
/// delivery topic partitioned by device (fan-out split from matching) can feed it the same way later.
protocol DeliveryInput: Sendable {
    /// Queues notifications, each behind what its subscription already has (a revoke is queued like any
    /// other). Non-blocking: called under a partition's lock, in the order the decisions were made there.
    /// Each entry's `holds` are released (``EventTickets``) once it is delivered, stored for retry, or dropped.
    /// `fetchedAt`: when the consumer's poll returned the record they come from (``PendingNotification/fetchedAt``),
    /// 0 when they come from no record. `profile`: the settings of their app they were matched with (an event's),
    /// which the input may use rather than look the app up again (the delivery service chooses their lanes by
    /// it); nil when not known (notifications of several apps, or none was read).
    func enqueue(_ notifications: [PendingNotification], fetchedAt: UInt64, profile: AppProfile?)
}

extension DeliveryInput {
    /// Notifications that come from no fetched record (revokes, sweeps).
    func enqueue(_ notifications: [PendingNotification]) { enqueue(notifications, fetchedAt: 0, profile: nil) }
}
