import Logging
import PushCore

/// One notification to one subscriber, ready to send.
struct Delivery: Sendable {
    var app: String
    var subscriber: SubscriberKey
    var payload: [UInt8]
    var sender: any PushSender
    var ticket: OrderedDelivery.Ticket
}

/// Turns matched notifications into provider requests: builds each payload once per (node, mode, format),
/// picks the sender of the subscriber's kind, and keeps per-subscriber order.
public final class Dispatcher: Sendable {
    let senders: ProviderRegistry
    let ordering = OrderedDelivery()
    let metrics: GatewayMetrics
    let logger: Logger

    init(senders: ProviderRegistry, metrics: GatewayMetrics, logger: Logger) {
        self.senders = senders
        self.metrics = metrics
        self.logger = logger
    }

    /// Prepares the deliveries of an event's notifications. Runs on the consumer thread, in log order.
    func prepare(app: String, notifications: [MatchedNotification]) -> [Delivery] {
        var deliveries: [Delivery] = []
        for notification in notifications {
            guard let payload = V1Payload.build(app: app, path: notification.path, content: notification.content) else {
                metrics.notificationFailed(provider: "none", reason: "payload_too_large")
                logger.error("payload over 4093 bytes even without data: not sent", metadata: ["app": "\(app)", "sp": "\(notification.path)"])
                continue
            }
            let bytes = payload.jsonBytes()
            if case .revoke(let reason) = notification.content {
                metrics.revoked(reason: reason.rawValue, count: notification.recipients.count)
            }
            for recipient in notification.recipients {
                guard let sender = senders.sender(app: app, kind: recipient.subscriber.kind) else {
                    metrics.notificationFailed(provider: recipient.subscriber.kind.rawValue, reason: "no_provider")
                    continue
                }
                let key = "\(app)\u{0}\(recipient.subscriber.kind.rawValue)\u{0}\(recipient.subscriber.token)"
                deliveries.append(
                    Delivery(app: app, subscriber: recipient.subscriber, payload: bytes, sender: sender, ticket: ordering.reserve(key)))
            }
        }
        return deliveries
    }

    /// Sends one delivery after the earlier ones to the same subscriber.
    func send(_ delivery: Delivery) async -> DeliveryOutcome {
        await ordering.wait(for: delivery.ticket)
        defer { ordering.release(delivery.ticket) }
        let outcome = await delivery.sender.send(token: delivery.subscriber.token, payload: delivery.payload)
        switch outcome {
        case .sent:
            metrics.notificationSent(provider: delivery.sender.provider)
        case .failed(let reason, _, _):
            metrics.notificationFailed(provider: delivery.sender.provider, reason: reason)
        }
        return outcome
    }
}
