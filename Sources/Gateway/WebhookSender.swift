import Providers
import PushCore
import SSLCrypto

/// The sender of an app's `kind: "webhook"` subscriptions: the subscriber's token holds the destination and the
/// context (``SubscriberKey/webhook(destination:context:uid:)``), the payload is the request body
/// (``PayloadBuilder``), and the message id is the `webhook-id`. At most `maxInFlightPerHost` requests of the app
/// go to one destination host at a time: the delivery queue holds the others back (``gate(token:)``), so they
/// take no sending place while they wait.
final class WebhookSender: PushSender {
    let client: WebhookClient
    let maxInFlightPerHost: Int
    var provider: String { "webhook" }
    let project: String

    init(app: String, client: WebhookClient, maxInFlightPerHost: Int) {
        self.client = client
        self.maxInFlightPerHost = maxInFlightPerHost
        self.project = "webhook:" + app
    }

    /// The gate of a subscription's deliveries (``DeliveryQueue/Gate``): the app and the destination's host name
    /// (as written, lowercased by ``WebhookURL``; not the address it resolves to), `maxInFlightPerHost` places.
    func gate(token: String) -> DeliveryQueue.Gate { Self.gate(project: project, token: token, limit: maxInFlightPerHost) }

    static func gate(project: String, token: String, limit: Int) -> DeliveryQueue.Gate {
        let host = (try? WebhookURL(String(SubscriberKey(kind: .webhook, token: token).destination)))?.host ?? ""
        return DeliveryQueue.Gate(key: project + "/" + host, limit: limit)
    }

    /// The `webhook-id` of a notification: `msg_` and 22 characters of a hash of what caused it (the change
    /// event's id) and of its body (which names the subscription). Every attempt of one message, on any replica,
    /// has the same id; a redelivery after a crash too, so receivers can drop duplicates by it. (Two identical
    /// bodies caused by events published without an `event_id` share one.)
    static func messageID(origin: String, body: [UInt8]) -> String {
        var material = Array("pushgateway-webhook-message".utf8)
        let originBytes = Array(origin.utf8)
        let count = UInt32(truncatingIfNeeded: originBytes.count)
        material.append(contentsOf: [UInt8(count >> 24), UInt8((count >> 16) & 0xFF), UInt8((count >> 8) & 0xFF), UInt8(count & 0xFF)])
        material.append(contentsOf: originBytes)
        material.append(contentsOf: body)
        return "msg_" + Base64URL.encode(SHA256.hash(material).prefix(16))
    }

    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        await send(token: token, payload: payload, messageID: "msg_unidentified", options: .none, submission: nil)
    }

    /// Webhooks take no delivery options (docs/DELIVERY.md).
    func send(
        token: String, payload: [UInt8], messageID: String, options: DeliveryOptions, submission: RequestSubmission?
    ) async -> DeliveryOutcome {
        let destination = String(SubscriberKey(kind: .webhook, token: token).destination)
        return await client.send(destination: destination, messageID: messageID, body: payload, submission: submission)
    }
}
