import PushCore

extension PartitionMachine {
    /// A user notification (the user-notifications topic, partitioned by app id like the change topic): one
    /// notification per device of `notification.uid` (``PushCore/AppIndex/devices(ofUser:)``: each distinct push
    /// destination of the user's subscriptions, in the format of the subscription whose delivery line carries it).
    /// Expired subscriptions are skipped (the sweep revokes them). A device that gave its own key (v2 `encryption`)
    /// gets the message encrypted for it alone, as its other notifications. Returns how many were queued.
    ///
    /// Webhook subscriptions (once they exist) are devices too: `devices(ofUser:)` lists every destination kind,
    /// and the delivery service picks the sender by kind.
    public mutating func notifyUser(
        _ notification: UserNotification, now: Int64, eventTime: Double?, ticket: UInt64,
        v1Payload: (DataPath, SubscriberKey, NotificationContent) -> [UInt8]?
    ) -> (notifications: Int, actions: [Action]) {
        guard contents.role == .owner, let app = contents.existingApp(notification.app) else { return (0, []) }
        let content = NotificationContent.user(notification.message)
        var queued: [PendingNotification] = []
        var v1Bytes = V1PayloadCache()
        for device in app.index.devices(ofUser: notification.uid) where device.settings.expiresAt > now {
            var pending = PendingNotification(
                app: app.name, path: device.path, subscriber: device.subscriber, format: device.settings.format,
                encryption: device.settings.encryption, content: content,
                scope: app.name, origin: notification.message.eventID, firstFailureAt: Double(now))
            if device.settings.format == .v1 {
                // The same bytes for every v1 device of one size limit: no path, no subscription id in them.
                guard let bytes = v1Bytes.bytes(for: device.subscriber, build: { v1Payload(device.path, device.subscriber, content) })
                else { continue }
                pending.payload = bytes
            }
            pending.holds = [ticket]
            pending.eventTime = eventTime
            queued.append(pending)
        }
        guard !queued.isEmpty else { return (0, []) }
        return (queued.count, [.retainTicket(ticket, count: queued.count), .deliver(queued)])
    }
}
