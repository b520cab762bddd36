/// Sends a data payload to one device: what a provider offers the gateway (``FCMClient`` and ``HMSClient``
/// behind the gateway's adapters, the console sink of the embedded defaults).
public protocol PushSender: Sendable {
    /// The provider label in metrics: `fcm`, `hms`, `console`.
    var provider: String { get }
    /// The provider project it sends through (`fcm:<project id>`, `hms:<app id>`), for the per-app status.
    var project: String { get }
    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome
    /// The same, with the id of the message, the same for every attempt of it (a webhook's `webhook-id`), how
    /// the provider may hold or replace the message (a user notification's TTL and collapse key), and, for the
    /// first attempt of a notification from a fetched record, the mark the sender records when it hands the
    /// request to the HTTP client (``RequestSubmission/submitted()``). By default only the token and the payload
    /// are used (the console sink: docs/DELIVERY.md).
    func send(
        token: String, payload: [UInt8], messageID: String, options: DeliveryOptions, submission: RequestSubmission?
    ) async -> DeliveryOutcome
}

extension PushSender {
    public func send(
        token: String, payload: [UInt8], messageID: String, options: DeliveryOptions, submission: RequestSubmission?
    ) async -> DeliveryOutcome {
        await send(token: token, payload: payload)
    }
}
