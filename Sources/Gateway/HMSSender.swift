import Foundation
import Logging
import Providers
import PushCore
import Synchronization

/// Huawei Push Kit through one app's credentials.
///
/// `80300007` (all tokens invalid) revokes one device, except when it may be the app's configuration: Huawei
/// lists a wrong app id among its causes, and revoking every device of an app over one configuration mistake
/// would be a disaster (SPEC §8). So a device is revoked only when, over the last ten minutes, the app's
/// project has delivered to some device and at most half of the devices it answered for were refused with
/// `80300007` (``MassFailureGuard``). Otherwise the failure is our fault: nobody is revoked, the notification
/// is retried, and the error is logged and counted.
public final class HMSSender: PushSender {
    let client: HMSClient
    private let guardrail = Mutex(MassFailureGuard())
    public var provider: String { "hms" }
    public var project: String { "hms:" + client.appId }

    public init(client: HMSClient) { self.client = client }

    public func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        await send(token: token, payload: payload, messageID: "", options: .none, submission: nil)
    }

    public func send(
        token: String, payload: [UInt8], messageID: String, options: DeliveryOptions, submission: RequestSubmission?
    ) async -> DeliveryOutcome {
        let result = await client.send(token: token, dataJSON: payload, options: options, submission: submission)
        let now = WallClock.now()
        switch result {
        case .sent:
            guardrail.withLock { $0.record(token: token, invalid: false, now: now) }
            return .sent
        case .failed(let error):
            let reason = error.code.map { "hms_\($0.rawValue)" } ?? "hms_\(error.source)"
            var classification = error.classification
            if error.isAllTokensInvalid {
                let trusted = guardrail.withLock { $0.refusalIsCredible(token: token, now: now) }
                if !trusted { classification = .ourFault }
            }
            return .failed(
                DeliveryFailure(
                    reason: reason, classification: classification, retryAfter: error.minimumRetryDelaySeconds, httpStatus: error.httpStatus,
                    message: error.message.isEmpty ? nil : error.message))
        }
    }
}
