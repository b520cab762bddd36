import Providers
import PushCore

/// The sender of an app's `kind: "apns"` subscriptions: the subscriber's token is the device token (hex), the payload
/// the data document the other channels carry (at most 4057 bytes: ``PushCore/SubscriberKind/maximumPayloadSize``),
/// sent as a background push. Its project, `apns:<team>/<bundle id>`, names its in-flight places and its status.
final class APNsSender: PushSender {
    let client: APNsClient
    /// What the credentials were built from (``APNsSettings/fingerprint(key:)``).
    let fingerprint: String
    var provider: String { "apns" }
    var project: String { "apns:" + client.providerToken.teamID + "/" + client.bundleID }

    init(client: APNsClient, fingerprint: String) {
        self.client = client
        self.fingerprint = fingerprint
    }

    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        await client.send(deviceToken: token, data: payload)
    }

    func send(
        token: String, payload: [UInt8], messageID: String, options: DeliveryOptions, submission: RequestSubmission?
    ) async -> DeliveryOutcome {
        await client.send(deviceToken: token, data: payload, options: options, submission: submission)
    }
}
