import Foundation
import Logging
import PushCore

/// One JSON object per line on standard error: `{"ts","level","label","source","msg",...metadata}`.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String

    public init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields: [ExactString: JSONValue] = [
            "ts": .string(Date().ISO8601Format(.iso8601.time(includingFractionalSeconds: true).year().month().day())),
            "level": .string(event.level.rawValue),
            "label": .string(label),
            "source": .string(event.source),
            "msg": .string(event.message.description),
        ]
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        for (key, value) in merged { fields[ExactString(key)] = .string(value.description) }
        var line = JSONWriter.bytes(.object(fields))
        line.append(0x0A)
        line.withUnsafeBytes { bytes in
            guard let base = bytes.baseAddress else { return }
            _ = write(STDERR_FILENO, base, bytes.count)
        }
    }
}
