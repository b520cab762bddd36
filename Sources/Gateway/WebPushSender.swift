import Providers
import PushCore

/// The sender of an app's `kind: "webpush"` subscriptions: the subscriber's token holds the browser's subscription
/// (``PushCore/SubscriberKey/webPush(endpoint:p256dh:auth:uid:)``), the payload is the data document the other
/// channels carry (at most 3993 bytes: ``PushCore/SubscriberKind/maximumPayloadSize``), encrypted per message. At
/// most `maxInFlightPerHost` requests of the app go to one push service host at a time (``gate(token:)``).
final class WebPushSender: PushSender {
    let client: WebPushClient
    let maxInFlightPerHost: Int
    var provider: String { "webpush" }
    let project: String

    init(app: String, client: WebPushClient, maxInFlightPerHost: Int) {
        self.client = client
        self.maxInFlightPerHost = maxInFlightPerHost
        self.project = "webpush:" + app
    }

    /// The gate of a subscription's deliveries: the app and the endpoint's host name, `maxInFlightPerHost` places.
    func gate(token: String) -> DeliveryQueue.Gate {
        DeliveryQueue.Gate(key: project + "/" + (client.host(ofSubscription: token) ?? ""), limit: maxInFlightPerHost)
    }

    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        await client.send(subscription: token, payload: payload)
    }

    func send(
        token: String, payload: [UInt8], messageID: String, options: DeliveryOptions, submission: RequestSubmission?
    ) async -> DeliveryOutcome {
        await client.send(subscription: token, payload: payload, options: options, submission: submission)
    }
}
