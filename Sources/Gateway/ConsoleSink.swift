import Foundation
import Logging
import Providers
import PushCore
import Synchronization

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
