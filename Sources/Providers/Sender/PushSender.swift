/// Sends a data payload to one device: what a provider offers the gateway (``FCMClient`` and ``HMSClient``
/// behind the gateway's adapters, the console sink of the embedded defaults).
public protocol PushSender: Sendable {
    /// The provider label in metrics: `fcm`, `hms`, `console`.
    var provider: String { get }
    /// The provider project it sends through (`fcm:<project id>`, `hms:<app id>`), for the per-app status.
    var project: String { get }
    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome
    /// The same, with the id of the message, the same for every attempt of it (a webhook's `webhook-id`).
    /// By default the id is not used.
    func send(token: String, payload: [UInt8], messageID: String) async -> DeliveryOutcome
    /// The same, with how the provider may hold or replace the message (a user notification's TTL and collapse
    /// key). By default the options are not used (webhooks, the console sink: docs/DELIVERY.md).
    func send(token: String, payload: [UInt8], messageID: String, options: DeliveryOptions) async -> DeliveryOutcome
}

extension PushSender {
    public func send(token: String, payload: [UInt8], messageID: String) async -> DeliveryOutcome {
        await send(token: token, payload: payload)
    }

    public func send(token: String, payload: [UInt8], messageID: String, options: DeliveryOptions) async -> DeliveryOutcome {
        await send(token: token, payload: payload, messageID: messageID)
    }
}
