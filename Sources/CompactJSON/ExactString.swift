#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A string compared, hashed and ordered by its exact UTF-8 bytes.
///
/// Swift's `String` equality is Unicode canonical equivalence: `"\u{212A}ate" == "Kate"` (KELVIN SIGN) and a
/// precomposed `é` equals `e` + U+0301. An identity (app id, uid, path key, push token, subscription id,
/// JSON member name) must not conflate such strings: the upstream database, the push providers and the read
/// rules all see bytes, so two strings that differ in bytes are two identities. Every map or set keyed by an
/// identity is keyed by this type (or by a type whose `Hashable` conformance compares bytes the same way).
public struct ExactString: Hashable, Comparable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    public let string: String

    @inlinable public init(_ string: String) { self.string = string }
    public init(stringLiteral value: String) { self.string = value }

    public var description: String { string }

    @inlinable public var utf8: String.UTF8View { string.utf8 }

    public static func == (left: ExactString, right: ExactString) -> Bool { left.string.bytesEqual(right.string) }

    public func hash(into hasher: inout Hasher) { string.hashBytes(into: &hasher) }

    /// Byte order (UTF-8), the order JSONWriter sorts object members in.
    public static func < (left: ExactString, right: ExactString) -> Bool {
        left.string.utf8.lexicographicallyPrecedes(right.string.utf8)
    }
}

extension String {
    /// True when both strings have the same UTF-8 bytes (unlike `==`, which is canonical equivalence).
    public func bytesEqual(_ other: String) -> Bool {
        let left = utf8
        let right = other.utf8
        guard left.count == right.count else { return false }
        let fast = left.withContiguousStorageIfAvailable { l in
            right.withContiguousStorageIfAvailable { r in
                guard let a = l.baseAddress, let b = r.baseAddress else { return l.isEmpty }
                return memcmp(a, b, l.count) == 0
            }
        }
        if let fast, let result = fast { return result }
        return left.elementsEqual(right)
    }

    /// Feeds the UTF-8 bytes (and their count) to `hasher`: consistent with ``bytesEqual(_:)``.
    public func hashBytes(into hasher: inout Hasher) {
        let bytes = utf8
        hasher.combine(bytes.count)
        let done: Void? = bytes.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if done == nil {
            for byte in bytes { hasher.combine(byte) }
        }
    }
}
