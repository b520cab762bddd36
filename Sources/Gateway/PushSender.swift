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
    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome
}

/// FCM HTTP v1 through one app's service account.
public struct FCMSender: PushSender {
    let client: FCMClient
    public var provider: String { "fcm" }

    public init(client: FCMClient) { self.client = client }

    public func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        switch await client.send(token: token, dataJSON: payload) {
        case .sent:
            return .sent
        case .failed(let error):
            let reason = error.code.map { "\($0)" } ?? error.source.description
            let kind: DeliveryFailure.Kind =
                switch error.classification {
                case .retryable: .retryable
                case .tokenDead: .tokenDead
                case .ourFault: .ourFault
                }
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
/// `80300007` (all tokens invalid) revokes one device, except when it hits most of the app's devices at once:
/// Huawei lists a wrong app id among its causes, and revoking every device of an app over one configuration
/// mistake would be a disaster (SPEC §8). Over the last minute, once at least ``MassFailureGuard/minimumSample``
/// sends were answered and more than half of them were `80300007`, it is reported as our fault instead (nobody
/// revoked, the notification retried).
public final class HMSSender: PushSender {
    let client: HMSClient
    private let guardrail = Mutex(MassFailureGuard())
    public var provider: String { "hms" }

    public init(client: HMSClient) { self.client = client }

    public func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        let result = await client.send(token: token, dataJSON: payload)
        let now = WallClock.now()
        switch result {
        case .sent:
            _ = guardrail.withLock { $0.record(invalidToken: false, now: now) }
            return .sent
        case .failed(let error):
            let reason = error.code.map { "hms_\($0.rawValue)" } ?? "hms_\(error.source)"
            var kind: DeliveryFailure.Kind =
                switch error.classification {
                case .retryable: .retryable
                case .tokenDead: .tokenDead
                case .ourFault: .ourFault
                }
            if error.isAllTokensInvalid {
                let massive = guardrail.withLock { $0.record(invalidToken: true, now: now) }
                if massive { kind = .ourFault }
            }
            return .failed(DeliveryFailure(reason: reason, kind: kind, retryAfter: error.minimumRetryDelaySeconds))
        }
    }
}

/// Counts, over a sliding minute, the answers of one provider project and how many said "token invalid".
struct MassFailureGuard {
    static let window = 60.0
    static let minimumSample = 10
    private var events: [(time: Double, invalid: Bool)] = []

    /// Records an answer; true when invalid-token answers are currently the majority of a large enough sample.
    mutating func record(invalidToken: Bool, now: Double) -> Bool {
        events.append((now, invalidToken))
        if let first = events.firstIndex(where: { $0.time >= now - Self.window }), first > 0 { events.removeFirst(first) }
        let invalid = events.count { $0.invalid }
        return events.count >= Self.minimumSample && invalid * 2 > events.count
    }
}
