import Providers
import PushCore
import Synchronization

/// The sender of an app's `kind: "apns"` subscriptions: the subscriber's token is the device token (hex), the payload
/// the data document the other channels carry (at most 4057 bytes: ``PushCore/SubscriberKind/maximumPayloadSize``),
/// sent as a background push. Its project, `apns:<team>/<bundle id>`, names its in-flight places and its status.
///
/// `BadDeviceToken` and `DeviceTokenNotForTopic` revoke one device, except when they may be the app's configuration:
/// APNs answers them to every token of an app whose `environment` (production or development) or `bundleId` is wrong,
/// and revoking every device of an app over one setting would be a disaster (SPEC §8). So, as for HMS's
/// `80300007` (``MassFailureGuard``), a device is revoked only when, over the last ten minutes, the project has
/// reached some device and at most half of the devices it answered for were refused so. Otherwise the failure is our
/// fault: nobody is revoked, the notification is retried, the error is logged and counted. `Unregistered` (410: the
/// app was removed from the device) is about one device whatever the settings, and always revokes.
final class APNsSender: PushSender {
    let client: APNsClient
    /// What the credentials were built from (``APNsSettings/fingerprint(key:)``).
    let fingerprint: String
    private let guardrail = Mutex(MassFailureGuard())
    var provider: String { "apns" }
    var project: String { "apns:" + client.providerToken.teamID + "/" + client.bundleID }

    init(client: APNsClient, fingerprint: String) {
        self.client = client
        self.fingerprint = fingerprint
    }

    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        await send(token: token, payload: payload, messageID: "", options: .none, submission: nil)
    }

    func send(
        token: String, payload: [UInt8], messageID: String, options: DeliveryOptions, submission: RequestSubmission?
    ) async -> DeliveryOutcome {
        let outcome = await client.send(deviceToken: token, data: payload, options: options, submission: submission)
        return guarded(outcome, token: token, now: WallClock.now())
    }

    /// `outcome` with a configuration-shaped refusal made our fault unless it is credible for this one device.
    func guarded(_ outcome: DeliveryOutcome, token: String, now: Double) -> DeliveryOutcome {
        switch outcome {
        case .sent:
            guardrail.withLock { $0.record(token: token, invalid: false, now: now) }
            return outcome
        case .failed(var failure) where failure.reason == "BadDeviceToken" || failure.reason == "DeviceTokenNotForTopic":
            let trusted = guardrail.withLock { $0.refusalIsCredible(token: token, now: now) }
            if !trusted { failure.classification = .ourFault }
            return .failed(failure)
        case .failed:
            return outcome
        }
    }
}
