/// A path in an app's database: `/`-separated keys, normalised to a leading `/` and no trailing `/`;
/// `/` is the root. Keys are ``ExactString``s: two paths are the same only when their bytes are.
public struct DataPath: Sendable, Hashable, CustomStringConvertible {
    public static let maximumUTF8Length = 2048
    public static let root = DataPath(validatedSegments: [])

    public let segments: [ExactString]

    public init(validatedSegments: [ExactString]) { self.segments = validatedSegments }

    /// Parses and validates a path. Accepts `""`, `"/"`, `"a/b"`, `"/a/b"`, `"/a/b/"`; rejects empty keys
    /// (`/a//b`), keys holding `.` `$` `#` `[` `]` or control characters, and paths over 2048 bytes.
    public init(_ text: some StringProtocol) throws(PathError) {
        let text = String(text)
        guard text.utf8.count <= Self.maximumUTF8Length + 2 else { throw .tooLong }
        var body = Substring(text)
        if body.hasPrefix("/") { body = body.dropFirst() }
        if body.isEmpty {
            self.segments = []
            return
        }
        if body.hasSuffix("/") {
            body = body.dropLast()
            if body.isEmpty { throw .emptyKey }
        }
        var segments: [ExactString] = []
        for key in body.split(separator: "/", omittingEmptySubsequences: false) {
            guard !key.isEmpty else { throw .emptyKey }
            for scalar in key.unicodeScalars {
                switch scalar {
                case ".", "$", "#", "[", "]": throw .invalidCharacter(String(key))
                default:
                    if scalar.value < 0x20 || scalar.value == 0x7F { throw .invalidCharacter(String(key)) }
                }
            }
            segments.append(ExactString(String(key)))
        }
        self.segments = segments
        guard self.utf8Length <= Self.maximumUTF8Length else { throw .tooLong }
    }

    public var isRoot: Bool { segments.isEmpty }

    public var description: String { segments.isEmpty ? "/" : "/" + segments.map(\.string).joined(separator: "/") }

    /// Length of the normalised text in bytes.
    public var utf8Length: Int {
        segments.isEmpty ? 1 : segments.reduce(0) { $0 + 1 + $1.string.utf8.count }
    }

    public func appending(_ key: ExactString) -> DataPath { DataPath(validatedSegments: segments + [key]) }

    /// True when `self` is `other` or one of its ancestors.
    public func isPrefix(of other: DataPath) -> Bool {
        segments.count <= other.segments.count && zip(segments, other.segments).allSatisfy { $0 == $1 }
    }
}

public enum PathError: Error, Equatable, CustomStringConvertible {
    case emptyKey
    case invalidCharacter(String)
    case tooLong

    public var description: String {
        switch self {
        case .emptyKey: return "path has an empty key"
        case .invalidCharacter(let key):
            return "path key '\(key.prefix(64))' holds a forbidden character (. $ # [ ] or a control character)"
        case .tooLong: return "path is longer than \(DataPath.maximumUTF8Length) bytes"
        }
    }
}
