/// A path in an app's database: `/`-separated keys, normalised to a leading `/` and no trailing `/`;
/// `/` is the root. Keys are ``ExactString``s: two paths are the same only when their bytes are.
public struct DataPath: Sendable, Hashable, CustomStringConvertible {
    public static let maximumUTF8Length = 2048
    public static let root = DataPath(validatedSegments: [])

    public let segments: [ExactString]

    public init(validatedSegments: [ExactString]) { self.segments = validatedSegments }

    /// Parses and validates a path. Accepts `""`, `"/"`, `"a/b"`, `"/a/b"`, `"/a/b/"`; rejects empty keys
    /// (`/a//b`), keys holding `.` `$` `#` `[` `]` or control characters, and paths over 2048 bytes.
    ///
    /// Works on the UTF-8 bytes: a key is split on the byte `/`, never on Swift `Character`s (a combining
    /// mark after a `/` would otherwise make one character of both, and `/\u{301}x` one key holding a `/`).
    public init(_ text: some StringProtocol) throws(PathError) {
        let bytes = Array(text.utf8)
        guard bytes.count <= Self.maximumUTF8Length + 2 else { throw .tooLong }
        let slash = UInt8(ascii: "/")
        var start = 0
        var end = bytes.count
        if start < end, bytes[start] == slash { start += 1 }
        if start == end {
            self.segments = []
            return
        }
        if bytes[end - 1] == slash {
            end -= 1
            if start == end { throw .emptyKey }
        }
        var segments: [ExactString] = []
        var keyStart = start
        for index in start...end where index == end || bytes[index] == slash {
            let key = bytes[keyStart..<index]
            guard !key.isEmpty else { throw .emptyKey }
            for byte in key {
                switch byte {
                case UInt8(ascii: "."), UInt8(ascii: "$"), UInt8(ascii: "#"), UInt8(ascii: "["), UInt8(ascii: "]"),
                    0x00..<0x20, 0x7F:
                    throw .invalidCharacter(String(decoding: key, as: UTF8.self))
                default: break
                }
            }
            segments.append(ExactString(String(decoding: key, as: UTF8.self)))
            keyStart = index + 1
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
