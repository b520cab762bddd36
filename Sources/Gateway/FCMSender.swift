import Foundation
import Logging
import Providers
import PushCore
import Synchronization

/// FCM HTTP v1 through one app's service account.
public struct FCMSender: PushSender {
    let client: FCMClient
    public var provider: String { "fcm" }
    public var project: String { "fcm:" + client.projectID }

    public init(client: FCMClient) { self.client = client }

    public func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        await send(token: token, payload: payload, messageID: "", options: .none, submission: nil)
    }

    public func send(
        token: String, payload: [UInt8], messageID: String, options: DeliveryOptions, submission: RequestSubmission?
    ) async -> DeliveryOutcome {
        switch await client.send(token: token, dataJSON: payload, options: options, submission: submission) {
        case .sent:
            return .sent
        case .failed(let error):
            let reason = error.code.map { "\($0)" } ?? error.source.description
            // QUOTA_EXCEEDED is project-wide unless FCM says it is this device's own message rate.
            let projectQuota = error.code == .quotaExceeded && !error.message.lowercased().contains("device")
            return .failed(
                DeliveryFailure(
                    reason: reason, classification: error.classification, retryAfter: error.minimumRetryDelaySeconds, projectQuota: projectQuota,
                    httpStatus: error.httpStatus, message: error.message.isEmpty ? nil : error.message))
        }
    }
}
