import Logging
import PushCore
import PushFormats

/// One notification to one subscriber, ready to send.
struct Delivery: Sendable {
    var app: String
    var subscriber: SubscriberKey
    var payload: [UInt8]
    var sender: any PushSender
    var ticket: OrderedDelivery.Ticket
}

/// Turns matched notifications into provider requests: builds each payload in the subscriber's format (v1
/// once per node; v2 per subscription, since it names the subscription and is encrypted with the app's active
/// key), picks the sender of the subscriber's kind from the app's settings, and keeps per-subscriber order.
public final class Dispatcher: Sendable {
    let ordering = OrderedDelivery()
    let metrics: GatewayMetrics
    let logger: Logger

    init(metrics: GatewayMetrics, logger: Logger) {
        self.metrics = metrics
        self.logger = logger
    }

    /// Prepares the deliveries of an event's notifications. Runs on the consumer thread, in log order.
    func prepare(profile: AppProfile, notifications: [MatchedNotification]) -> [Delivery] {
        let app = profile.name
        var deliveries: [Delivery] = []
        for notification in notifications {
            var v1Bytes: [UInt8]?
            if case .revoke(let reason) = notification.content {
                metrics.revoked(reason: reason.rawValue, count: notification.recipients.count)
            }
            for recipient in notification.recipients {
                guard let sender = profile.sender(for: recipient.subscriber.kind) else {
                    metrics.notificationFailed(provider: recipient.subscriber.kind.rawValue, reason: "no_provider")
                    continue
                }
                let bytes: [UInt8]
                switch recipient.format {
                case .v1:
                    if v1Bytes == nil {
                        v1Bytes = V1Payload.build(app: app, path: notification.path, content: notification.content)?.jsonBytes()
                    }
                    guard let v1Bytes else { tooLarge(app, notification); continue }
                    bytes = v1Bytes
                case .v2:
                    let id = SubscriptionID.make(app: app, path: notification.path, subscriber: recipient.subscriber)
                    do {
                        guard
                            let payload = try V2Payload.build(
                                app: app, path: notification.path, subscriptionID: id, content: notification.content,
                                key: profile.encryption?.active)
                        else { tooLarge(app, notification); continue }
                        bytes = payload.jsonBytes()
                    } catch {
                        metrics.notificationFailed(provider: sender.provider, reason: "encryption")
                        logger.error("v2 payload not built", metadata: ["app": "\(app)", "error": "\(error)"])
                        continue
                    }
                }
                let key = "\(app)\u{0}\(recipient.subscriber.kind.rawValue)\u{0}\(recipient.subscriber.token)"
                deliveries.append(
                    Delivery(app: app, subscriber: recipient.subscriber, payload: bytes, sender: sender, ticket: ordering.reserve(key)))
            }
        }
        return deliveries
    }

    private func tooLarge(_ app: String, _ notification: MatchedNotification) {
        metrics.notificationFailed(provider: "none", reason: "payload_too_large")
        logger.error(
            "payload over 4093 bytes even without data: not sent", metadata: ["app": "\(app)", "sp": "\(notification.path)"])
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
