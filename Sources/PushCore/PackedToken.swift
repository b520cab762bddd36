#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A push destination as the index holds it (issue 19, "state in 300 bytes per subscription"): the kind and the
/// token in one immutable object, shared by every subscription of the device and by the per-device counts,
/// compared and hashed by the kind and the token's exact UTF-8 bytes (like ``ExactString``).
///
/// FCM and HMS tokens are base64url text with at most one `:` (an FCM token is an instance id, `:`, and the
/// registration). Such a token is stored in 6 bits a character, its `:` as a position: a 156-byte FCM token takes
/// a 144-byte malloc block instead of a native string's 208. Any other text (webhook URLs and context, browser
/// subscriptions, tokens of other shapes) is stored as its bytes, after a 2-byte header instead of a native
/// string's 32. The choice follows from the bytes alone, so equal tokens have equal storage: equality and hashing
/// compare the stored bytes without decoding them.
///
/// Layout (``ManagedBuffer``: the 16-byte object header, a 2-byte header, then the tail). The header holds the
/// form (bit 15: packed), the kind (bits 12–14) and the token's length (bits 0–11: below 0xFFF, else 0xFFF):
/// - packed (length below 0xFFF): tail = the `:`'s offset + 1 (0: none; the offset is below 255) and the other
///   characters' 6-bit codes, four to three bytes, big-endian bit order;
/// - bytes: tail = the bytes; with a length of 0xFFF or more, the length in 4 bytes (little-endian) before them.
public struct PackedToken: @unchecked Sendable {
    // Sendable: the storage is immutable once made (its tail is written only in ``make(bytes:)``).
    final class Storage: ManagedBuffer<UInt16, UInt8> {}

    private let storage: Storage

    private init(_ storage: Storage) { self.storage = storage }

    private var header: UInt16 { storage.header }

    private func withTail<R>(_ body: (UnsafeMutablePointer<UInt8>) throws -> R) rethrows -> R {
        try storage.withUnsafeMutablePointerToElements(body)
    }

    /// True when both are the same object (tokens shared through the index).
    func isSame(as other: PackedToken) -> Bool { storage === other.storage }

    private static let packedFlag: UInt16 = 0x8000
    private static let longMark: UInt16 = 0xFFF
    private static let countMask: UInt16 = 0xFFF
    private static let noCode: UInt8 = 0xFF

    /// The 6-bit code of each byte of the base64url alphabet (`A`–`Z`, `a`–`z`, `0`–`9`, `-`, `_`); 0xFF for the others.
    private static let codes: [UInt8] = {
        var table = [UInt8](repeating: noCode, count: 256)
        for (code, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(code) }
        return table
    }()
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static func code(_ kind: SubscriberKind) -> UInt16 {
        switch kind {
        case .mobile: return 0
        case .huawei: return 1
        case .webhook: return 2
        case .webpush: return 3
        case .apns: return 4
        }
    }

    /// The kind of destination the token is of.
    public var kind: SubscriberKind {
        switch (header >> 12) & 7 {
        case 1: return .huawei
        case 2: return .webhook
        case 3: return .webpush
        case 4: return .apns
        default: return .mobile
        }
    }

    /// The stored form of `token`, of `kind`.
    public static func make(_ token: String, kind: SubscriberKind = .mobile) -> PackedToken {
        var token = token
        return token.withUTF8 { make(bytes: $0, kind: kind) }
    }

    /// The stored form of the token whose UTF-8 bytes are `bytes` (valid UTF-8), of `kind`.
    public static func make(bytes: UnsafeBufferPointer<UInt8>, kind: SubscriberKind = .mobile) -> PackedToken {
        let kindBits = code(kind) << 12
        if let packed = packed(bytes, kindBits: kindBits) { return packed }
        let count = bytes.count
        let long = count >= Int(longMark)
        let prefix = long ? 4 : 0
        let made = unsafeDowncast(
            Storage.create(minimumCapacity: prefix + count) { _ in kindBits | (long ? longMark : UInt16(count)) }, to: Storage.self)
        made.withUnsafeMutablePointerToElements { out in
            if long {
                let length = UInt32(count)
                for shift in 0..<4 { out[shift] = UInt8(truncatingIfNeeded: length >> UInt32(shift * 8)) }
            }
            if let base = bytes.baseAddress { (out + prefix).update(from: base, count: count) }
        }
        return PackedToken(made)
    }

    /// `bytes` packed, in one pass: nil unless they are base64url bytes with at most one `:` at an offset below
    /// 255, and fewer than 0xFFF.
    private static func packed(_ bytes: UnsafeBufferPointer<UInt8>, kindBits: UInt16) -> PackedToken? {
        let count = bytes.count
        guard count > 0, count < Int(longMark) else { return nil }
        return codes.withUnsafeBufferPointer { table in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1 + (count * 6 + 7) / 8) { scratch -> PackedToken? in
                var colon = 0  // its offset + 1
                var accumulator: UInt32 = 0
                var bits = 0
                var written = 1
                var offset = 0
                while offset < count {
                    // Four characters to three bytes at once while on a byte boundary and none of them is a colon
                    // (or anything else without a code: 0xFF has the two high bits set, a code never).
                    if bits == 0, offset + 4 <= count {
                        let (a, b, c, d) = (
                            table[Int(bytes[offset])], table[Int(bytes[offset + 1])], table[Int(bytes[offset + 2])],
                            table[Int(bytes[offset + 3])]
                        )
                        if (a | b | c | d) & 0xC0 == 0 {
                            let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                            scratch[written] = UInt8(truncatingIfNeeded: group >> 16)
                            scratch[written + 1] = UInt8(truncatingIfNeeded: group >> 8)
                            scratch[written + 2] = UInt8(truncatingIfNeeded: group)
                            written += 3
                            offset += 4
                            continue
                        }
                    }
                    let byte = bytes[offset]
                    let code = table[Int(byte)]
                    offset += 1
                    if code == noCode {
                        guard byte == UInt8(ascii: ":"), colon == 0, offset <= 255 else { return nil }
                        colon = offset
                        continue
                    }
                    accumulator = accumulator << 6 | UInt32(code)
                    bits += 6
                    if bits >= 8 {
                        bits -= 8
                        scratch[written] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                        written += 1
                    }
                }
                if bits > 0 {
                    scratch[written] = UInt8(truncatingIfNeeded: accumulator << UInt32(8 - bits))
                    written += 1
                }
                scratch[0] = UInt8(colon)
                let made = unsafeDowncast(
                    Storage.create(minimumCapacity: written) { _ in packedFlag | kindBits | UInt16(count) }, to: Storage.self)
                made.withUnsafeMutablePointerToElements { out in
                    if let base = scratch.baseAddress { out.update(from: base, count: written) }
                }
                return PackedToken(made)
            }
        }
    }

    private var isPacked: Bool { header & Self.packedFlag != 0 }

    /// The token's length in UTF-8 bytes.
    public var utf8Count: Int {
        let header = self.header
        let count = header & Self.countMask
        if header & Self.packedFlag != 0 || count != Self.longMark { return Int(count) }
        return withTail { Self.longCount($0) }
    }

    private static func longCount(_ tail: UnsafeMutablePointer<UInt8>) -> Int {
        (0..<4).reduce(0) { $0 | Int(tail[$1]) << ($1 * 8) }
    }

    /// The bytes of the tail in use.
    var storedCount: Int {
        let header = self.header
        let count = Int(header & Self.countMask)
        if header & Self.packedFlag != 0 {
            let characters = withTail { $0[0] } == 0 ? count : count - 1
            return 1 + (characters * 6 + 7) / 8
        }
        guard count == Self.longMark else { return count }
        return 4 + utf8Count
    }

    /// The heap bytes this object takes (``HeapCost``).
    var heapBytes: Int { HeapCost.block(16 + MemoryLayout<UInt16>.size + storedCount) }

    /// The token's text.
    public var string: String {
        let count = utf8Count
        guard count > 0 else { return "" }
        return withTail { tail in
            String(unsafeUninitializedCapacity: count) { out in
                guard let target = out.baseAddress else { return 0 }
                if !isPacked {
                    target.update(from: tail + (header & Self.countMask == Self.longMark ? 4 : 0), count: count)
                    return count
                }
                // The characters other than the colon are decoded in a row, three bytes to four characters, then
                // those after the colon moved up one place for it.
                let colon = Int(tail[0]) - 1  // -1: none
                let characters = colon < 0 ? count : count - 1
                Self.alphabet.withUnsafeBufferPointer { alphabet in
                    var read = 1
                    var written = 0
                    while written + 4 <= characters {
                        let group = UInt32(tail[read]) << 16 | UInt32(tail[read + 1]) << 8 | UInt32(tail[read + 2])
                        target[written] = alphabet[Int(group >> 18)]
                        target[written + 1] = alphabet[Int((group >> 12) & 0x3F)]
                        target[written + 2] = alphabet[Int((group >> 6) & 0x3F)]
                        target[written + 3] = alphabet[Int(group & 0x3F)]
                        read += 3
                        written += 4
                    }
                    var accumulator: UInt32 = 0
                    var bits = 0
                    while written < characters {
                        if bits < 6 {
                            accumulator = accumulator << 8 | UInt32(tail[read])
                            read += 1
                            bits += 8
                        }
                        bits -= 6
                        target[written] = alphabet[Int((accumulator >> UInt32(bits)) & 0x3F)]
                        written += 1
                    }
                }
                if colon >= 0 {
                    memmove(target + colon + 1, target + colon, characters - colon)
                    target[colon] = UInt8(ascii: ":")
                }
                return count
            }
        }
    }
}

extension PackedToken: Hashable, CustomStringConvertible {
    public static func == (left: PackedToken, right: PackedToken) -> Bool {
        if left.storage === right.storage { return true }
        guard left.header == right.header else { return false }
        let count = left.storedCount
        guard count == right.storedCount else { return false }
        return left.withTail { l in
            right.withTail { r in memcmp(l, r, count) == 0 }
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(header)
        let count = storedCount
        withTail { hasher.combine(bytes: UnsafeRawBufferPointer(start: $0, count: count)) }
    }

    public var description: String { string }
}
