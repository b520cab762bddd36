import Foundation
import Logging
import Providers
import PushCore
import Synchronization

/// The result of handing one notification to a provider.
public enum DeliveryOutcome: Sendable, Equatable {
    case sent
    case failed(DeliveryFailure)
    /// Not sent now: held back behind the subscription's pending retries (durably queued).
    case queued
}

extension DeliveryFailure.Kind {
    /// The providers' classification (FCM and HMS share it).
    init(_ classification: ProviderClassification) {
        switch classification {
        case .retryable: self = .retryable
        case .tokenDead: self = .tokenDead
        case .ourFault: self = .ourFault
        }
    }
}

/// Why a provider refused a notification, and what to do about it (SPEC §8).
public struct DeliveryFailure: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// Temporary: retry with backoff.
        case retryable
        /// The push token is dead: revoke the subscription.
        case tokenDead
        /// Our request, configuration or credentials are wrong: never revoke; report loudly and retry later.
        case ourFault
    }

    /// A low-cardinality label (a provider error code, `transport`, ...).
    public var reason: String
    public var kind: Kind
    /// `Retry-After`, or the provider's minimum wait (60 s after FCM `QUOTA_EXCEEDED`).
    public var retryAfter: Double?
    /// The provider project's quota is exhausted: pause the whole project, not only this device.
    public var projectQuota: Bool

    public init(reason: String, kind: Kind, retryAfter: Double? = nil, projectQuota: Bool = false) {
        self.reason = reason
        self.kind = kind
        self.retryAfter = retryAfter
        self.projectQuota = projectQuota
    }
}

/// Sends a data payload to one device.
public protocol PushSender: Sendable {
    /// The provider label in metrics: `fcm`, `hms`, `console`.
    var provider: String { get }
    /// The provider project it sends through (`fcm:<project id>`, `hms:<app id>`), for the per-app status.
    var project: String { get }
    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome
}

/// FCM HTTP v1 through one app's service account.
public struct FCMSender: PushSender {
    let client: FCMClient
    public var provider: String { "fcm" }
    public var project: String { "fcm:" + client.projectID }

    public init(client: FCMClient) { self.client = client }

    public func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        switch await client.send(token: token, dataJSON: payload) {
        case .sent:
            return .sent
        case .failed(let error):
            let reason = error.code.map { "\($0)" } ?? error.source.description
            let kind = DeliveryFailure.Kind(error.classification)
            // QUOTA_EXCEEDED is project-wide unless FCM says it is this device's own message rate.
            let projectQuota = error.code == .quotaExceeded && !error.message.lowercased().contains("device")
            return .failed(
                DeliveryFailure(
                    reason: reason, kind: kind, retryAfter: error.minimumRetryDelaySeconds, projectQuota: projectQuota))
        }
    }
}

/// The embedded default for an app without provider credentials: each notification is printed on standard
/// output as one JSON line, with the token shortened.
public final class ConsoleSink: PushSender {
    public var provider: String { "console" }
    public var project: String { "console" }
    private let app: String
    /// One lock for all sinks: lines of different apps never interleave.
    private static let output = Mutex(())

    public init(app: String) { self.app = app }

    public func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        var line: [UInt8] = Array(#"{"sink":"console","app":"#.utf8)
        JSONWriter.writeString(app, into: &line)
        line.append(contentsOf: #","token":"#.utf8)
        JSONWriter.writeString(String(token.prefix(6)) + "…", into: &line)
        line.append(contentsOf: #","data":"#.utf8)
        line.append(contentsOf: payload)
        line.append(contentsOf: "}\n".utf8)
        Self.output.withLock { _ in
            line.withUnsafeBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                var offset = 0
                while offset < bytes.count {
                    let written = write(STDOUT_FILENO, base + offset, bytes.count - offset)
                    if written <= 0 { break }
                    offset += written
                }
            }
        }
        return .sent
    }
}

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
        let result = await client.send(token: token, dataJSON: payload)
        let now = WallClock.now()
        switch result {
        case .sent:
            guardrail.withLock { $0.record(token: token, invalid: false, now: now) }
            return .sent
        case .failed(let error):
            let reason = error.code.map { "hms_\($0.rawValue)" } ?? "hms_\(error.source)"
            var kind = DeliveryFailure.Kind(error.classification)
            if error.isAllTokensInvalid {
                let trusted = guardrail.withLock { guardrail in
                    guardrail.record(token: token, invalid: true, now: now)
                    return guardrail.singleDeviceFailureIsCredible(now: now)
                }
                if !trusted { kind = .ourFault }
            }
            return .failed(DeliveryFailure(reason: reason, kind: kind, retryAfter: error.minimumRetryDelaySeconds))
        }
    }
}

/// What one provider project last answered for each device over a sliding window: reached, or refused as
/// invalid.
struct MassFailureGuard {
    static let window = 600.0
    static let maximumDevices = 100_000
    private var latest: [String: (time: Double, invalid: Bool)] = [:]

    mutating func record(token: String, invalid: Bool, now: Double) {
        latest[token] = (now, invalid)
        if latest.count > Self.maximumDevices {
            latest = latest.filter { $0.value.time >= now - Self.window }
        }
    }

    /// True when an invalid-token answer can be believed to be about that device: the project reached some
    /// device recently, and at most half of the devices it answered for were last refused as invalid.
    func singleDeviceFailureIsCredible(now: Double) -> Bool {
        var reached = 0
        var refused = 0
        for (_, answer) in latest where answer.time >= now - Self.window {
            if answer.invalid { refused += 1 } else { reached += 1 }
        }
        return reached > 0 && refused <= reached
    }
}
