import Logging
import PushCore
import PushFormats
import Synchronization

/// One notification to one subscriber, ready to send.
struct Delivery: Sendable {
    var app: String
    var path: DataPath
    var subscriber: SubscriberKey
    var format: NotificationFormat
    var content: NotificationContent
    var payload: [UInt8]
    var sender: any PushSender
    var ticket: OrderedDelivery.Ticket
    /// The change event it comes from (logs, retry records).
    var origin: String

    var retryKey: RetryKey { RetryKey(app: app, path: path, subscriber: subscriber) }
}

/// Turns matched notifications into provider requests: builds each payload in the subscriber's format (v1
/// once per node; v2 per subscription, since it names the subscription and is encrypted with the app's active
/// key), picks the sender of the subscriber's kind from the app's settings, and keeps per-subscriber order.
public final class Dispatcher: Sendable {
    let ordering = OrderedDelivery()
    let metrics: GatewayMetrics
    let logger: Logger
    private let retriesBox = Mutex<RetryService?>(nil)

    init(metrics: GatewayMetrics, logger: Logger) {
        self.metrics = metrics
        self.logger = logger
    }

    /// Failed deliveries go to the retry service (set once at start-up).
    func setRetries(_ retries: RetryService) { retriesBox.withLock { $0 = retries } }
    var retries: RetryService? { retriesBox.withLock { $0 } }

    /// The payload of one notification in the subscriber's format (nil when even its smallest form is over
    /// 4093 bytes, or encryption failed; both counted and logged).
    func payload(
        profile: AppProfile, path: DataPath, subscriber: SubscriberKey, format: NotificationFormat, content: NotificationContent
    ) -> [UInt8]? {
        let app = profile.name
        switch format {
        case .v1:
            guard let payload = V1Payload.build(app: app, path: path, content: content) else {
                tooLarge(app, path)
                return nil
            }
            return payload.jsonBytes()
        case .v2:
            let id = SubscriptionID.make(app: app, path: path, subscriber: subscriber)
            do {
                guard
                    let payload = try V2Payload.build(
                        app: app, path: path, subscriptionID: id, content: content, key: profile.encryption?.active)
                else {
                    tooLarge(app, path)
                    return nil
                }
                return payload.jsonBytes()
            } catch {
                metrics.notificationFailed(provider: "none", reason: "encryption")
                logger.error("v2 payload not built", metadata: ["app": "\(app)", "error": "\(error)"])
                return nil
            }
        }
    }

    /// Prepares the deliveries of an event's notifications. Runs on the consumer thread, in log order.
    func prepare(profile: AppProfile, notifications: [MatchedNotification], origin: String = "") -> [Delivery] {
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
                if recipient.format == .v1, let v1Bytes {
                    bytes = v1Bytes
                } else {
                    guard
                        let built = payload(
                            profile: profile, path: notification.path, subscriber: recipient.subscriber, format: recipient.format,
                            content: notification.content)
                    else { continue }
                    if recipient.format == .v1 { v1Bytes = built }
                    bytes = built
                }
                let key = "\(app)\u{0}\(recipient.subscriber.kind.rawValue)\u{0}\(recipient.subscriber.token)"
                deliveries.append(
                    Delivery(
                        app: app, path: notification.path, subscriber: recipient.subscriber, format: recipient.format,
                        content: notification.content, payload: bytes, sender: sender, ticket: ordering.reserve(key),
                        origin: origin))
            }
        }
        return deliveries
    }

    private func tooLarge(_ app: String, _ path: DataPath) {
        metrics.notificationFailed(provider: "none", reason: "payload_too_large")
        logger.error("payload over 4093 bytes even without data: not sent", metadata: ["app": "\(app)", "sp": "\(path)"])
    }

    /// Sends one delivery after the earlier ones to the same subscriber. While the subscription has pending
    /// retries, the delivery is queued behind them instead; a failed send is handed to the retry service
    /// (durably queued, or the subscription revoked for a dead token) before the next delivery to the same
    /// subscriber may start, so order is kept.
    ///
    /// `settled` is false only when a failure could not be stored at shutdown (the event is consumed again).
    @discardableResult
    func send(_ delivery: Delivery) async -> (outcome: DeliveryOutcome, settled: Bool) {
        await ordering.wait(for: delivery.ticket)
        defer { ordering.release(delivery.ticket) }
        let retries = self.retries
        if let retries {
            let (held, durable) = await retries.holdsBack(delivery)
            if held { return (.queued, durable) }
        }
        let outcome = await delivery.sender.send(token: delivery.subscriber.token, payload: delivery.payload)
        var settled = true
        switch outcome {
        case .sent:
            metrics.notificationSent(provider: delivery.sender.provider)
        case .queued:
            break
        case .failed(let failure):
            metrics.notificationFailed(provider: delivery.sender.provider, failure: failure)
            if let retries { settled = await retries.handle(failure, of: delivery) }
        }
        return (outcome, settled)
    }
}
