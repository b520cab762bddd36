import GatewayLogging
import Logging
import PushCore
import PushFormats

/// Builds a notification's data payload in the subscriber's format: v1 (seed 000, byte-exact; the same bytes
/// for every v1 subscriber of a node), or v2 (seed 001: per subscription, since it names the subscription id,
/// and encrypted for the device's own key when the subscription gave one, else with the app's active key when it
/// has one). Nil when even the smallest form is over the kind's limit (4093 bytes, 3993 for Web Push), or encryption
/// failed; both are counted and logged.
struct PayloadBuilder: Sendable {
    let metrics: GatewayMetrics
    let logger: Logger

    func payload(
        profile: AppProfile, path: DataPath, subscriber: SubscriberKey, format: NotificationFormat,
        encryption: DeviceEncryption? = nil, content: NotificationContent
    ) -> [UInt8]? {
        let app = profile.name
        if subscriber.kind == .webhook {
            return webhookBody(profile: profile, path: path, subscriber: subscriber, content: content)
        }
        switch format {
        case .v1:
            guard let payload = V1Payload.build(app: app, path: path, content: content, maximumSize: subscriber.kind.maximumPayloadSize) else {
                tooLarge(app, path, subscriber.kind)
                return nil
            }
            return payload.jsonBytes()
        case .v2:
            let id = SubscriptionID.make(app: app, path: path, subscriber: subscriber)
            do {
                // A device key replaces the app's: the app's keys must not open this device's notifications.
                let key = try encryption.map { (device) throws(EncryptionKeyError) in try DeviceKey.jweKey(device) }
                    ?? profile.encryption?.active
                guard
                    let payload = try V2Payload.build(
                        app: app, path: path, subscriptionID: id, content: content, key: key, maximumSize: subscriber.kind.maximumPayloadSize)
                else {
                    tooLarge(app, path, subscriber.kind)
                    return nil
                }
                return payload.jsonBytes()
            } catch {
                metrics.notificationFailed(provider: "none", reason: "encryption")
                logger.error("v2 payload not built", metadata: [LoggingKeys.app: "\(app)", LoggingKeys.error: "\(error)"])
                return nil
            }
        }
    }

    /// A webhook delivery's body (docs/PAYLOADS.md, "Webhooks"): the v2 event as JSON, not wrapped in JOSE (the
    /// request is HTTPS and signed), with the subscription's `context` added last. Cut down like a v2 payload
    /// (`TooBig`, `OnlyKeys`) when larger than the app's `webhook.maxBodyBytes`; nil when even the smallest form is.
    func webhookBody(profile: AppProfile, path: DataPath, subscriber: SubscriberKey, content: NotificationContent) -> [UInt8]? {
        let limit = profile.settings.webhook?.maxBodyBytes ?? WebhookSettings().maxBodyBytes
        let id = SubscriptionID.make(app: profile.name, path: path, subscriber: subscriber)
        for degrade in V2Event.forms(for: content) {
            var body = V2Event.bytes(app: profile.name, path: path, subscriptionID: id, content: content, degrade: degrade)
            body.removeLast()  // the closing brace
            body.append(contentsOf: #","context":"#.utf8)
            JSONWriter.writeString(String(subscriber.context), into: &body)
            body.append(UInt8(ascii: "}"))
            if body.count <= limit { return body }
        }
        metrics.notificationFailed(provider: "webhook", reason: "payload_too_large")
        logger.error(
            "webhook body over the app's webhook.maxBodyBytes even without data: not sent",
            metadata: [LoggingKeys.app: "\(profile.name)", LoggingKeys.sp: "\(path)"])
        return nil
    }

    private func tooLarge(_ app: String, _ path: DataPath, _ kind: SubscriberKind) {
        metrics.notificationFailed(provider: "none", reason: "payload_too_large")
        logger.error(
            "payload over \(kind.maximumPayloadSize) bytes even without data: not sent",
            metadata: [LoggingKeys.app: "\(app)", LoggingKeys.sp: "\(path)"])
    }
}
