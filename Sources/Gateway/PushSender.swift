import Foundation
import Logging
import Providers
import PushCore
import Synchronization

/// The result of handing one notification to a provider.
public enum DeliveryOutcome: Sendable, Equatable {
    case sent
    /// `reason` is a low-cardinality label (an FCM error code, `transport`, ...).
    case failed(reason: String, tokenDead: Bool, retryable: Bool)
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
            return .failed(
                reason: reason, tokenDead: error.classification == .tokenDead, retryable: error.classification == .retryable)
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
