/// The fast path of ``SubscriptionRecord/decode(key:value:)`` for the records the gateway itself writes: compact
/// JSON (no whitespace), strings without escapes, a key of five strings and a value with only `expiresAt`,
/// `format`, `mode` and optionally `authUID`. It reads straight from the bytes it is given (a Kafka message's
/// buffer) and builds only the strings the subscription keeps: no JSON tree, no member dictionary.
///
/// It accepts a strict subset of what the JSON decoder accepts, and on that subset gives the same record (the
/// strings are the same bytes, validated as UTF-8 the same way; the number is read by `Int64(_:)` from the same
/// lexeme). Anything else (whitespace, escapes, filters, a device key, a revocation, an unknown or repeated
/// member, a malformed record) answers nil, and the caller decodes with the JSON decoder, which then decides,
/// errors included, exactly as before.
enum CompactRecordScanner {
    /// The subscription record of `key` and `value` (nil or empty: a tombstone), or nil when the fast path does not
    /// apply.
    static func subscription(key: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>?) -> SubscriptionRecord? {
        var cursor = Cursor(bytes: key)
        guard cursor.take(.openBracket), let app = cursor.plainString(), cursor.take(.comma),
            let pathText = cursor.plainString(), cursor.take(.comma),
            let kindText = cursor.plainString(), cursor.take(.comma),
            let tokenSpan = cursor.plainSpan(), cursor.take(.comma),
            let uid = cursor.plainString(), cursor.take(.closeBracket), cursor.atEnd,
            !app.isEmpty, !tokenSpan.bytes.isEmpty, let kind = SubscriberKind(rawValue: kindText),
            let token = PackedToken.make(tokenSpan, kind: kind), let path = try? DataPath(pathText)
        else { return nil }
        let subscriber = SubscriberKey(packedToken: token, uid: uid.isEmpty ? nil : uid)
        guard let value, !value.isEmpty else { return .deletion(app: app, path: path, subscriber: subscriber) }
        guard let settings = settings(value) else { return nil }
        return SubscriptionRecord(app: app, subscription: Subscription(path: path, subscriber: subscriber, settings: settings))
    }

    /// `{"expiresAt":N,"format":"…","mode":"…"}` in any order, with `"authUID":"…"` optionally, each once.
    private static func settings(_ value: UnsafeBufferPointer<UInt8>) -> SubscriptionSettings? {
        var cursor = Cursor(bytes: value)
        guard cursor.take(.openBrace) else { return nil }
        var expiresAt: Int64?
        var format: NotificationFormat?
        var mode: SubscriptionMode?
        var authUID: String?
        repeat {
            guard let name = cursor.plainBytes(), cursor.take(.colon) else { return nil }
            switch Member(name) {
            case .expiresAt?:
                guard expiresAt == nil, let number = cursor.integer() else { return nil }
                expiresAt = number
            case .format?:
                guard format == nil, let text = cursor.plainString(), let parsed = NotificationFormat(rawValue: text) else { return nil }
                format = parsed
            case .mode?:
                guard mode == nil, let text = cursor.plainString(), let parsed = SubscriptionMode(rawValue: text) else { return nil }
                mode = parsed
            case .authUID?:
                guard authUID == nil, let text = cursor.plainString() else { return nil }
                authUID = text
            case nil:
                return nil
            }
        } while cursor.take(.comma)
        guard cursor.take(.closeBrace), cursor.atEnd, let expiresAt, let format, let mode else { return nil }
        return SubscriptionSettings(mode: mode, format: format, expiresAt: expiresAt, authUID: authUID, filters: nil, encryption: nil)
    }

    /// The members the fast path reads.
    private enum Member {
        case expiresAt, format, mode, authUID

        init?(_ name: UnsafeBufferPointer<UInt8>) {
            func equals(_ literal: StaticString) -> Bool {
                name.elementsEqual(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
            }
            if equals("expiresAt") {
                self = .expiresAt
            } else if equals("format") {
                self = .format
            } else if equals("mode") {
                self = .mode
            } else if equals("authUID") {
                self = .authUID
            } else {
                return nil
            }
        }
    }

    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        var atEnd: Bool { index == bytes.count }

        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// The bytes of a string without escapes or control characters (the quotes excluded), not yet validated.
        mutating func plainBytes() -> UnsafeBufferPointer<UInt8>? { plainSpan()?.bytes }

        /// ``plainBytes()``, and whether they are all ASCII.
        mutating func plainSpan() -> (bytes: UnsafeBufferPointer<UInt8>, isASCII: Bool)? {
            guard take(.quote) else { return nil }
            let start = index
            var high: UInt8 = 0
            while index < bytes.count {
                let byte = bytes[index]
                if byte == .quote {
                    index += 1
                    return (UnsafeBufferPointer(rebasing: bytes[start..<index - 1]), high < 0x80)
                }
                if byte == .backslash || byte < 0x20 { return nil }
                high |= byte
                index += 1
            }
            return nil
        }

        /// A string without escapes or control characters, validated as UTF-8 (as the JSON decoder does). ASCII, as
        /// tokens, ids and most paths are, is valid as it is: only other bytes go through the validation.

        mutating func plainString() -> String? {
            guard let (bytes, isASCII) = plainSpan() else { return nil }
            return isASCII ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
        }

        /// An integer as JSON writes it (`-?(0|[1-9][0-9]*)`), followed by `,` or `}`; nil otherwise or when it
        /// does not fit an Int64.
        mutating func integer() -> Int64? {
            let start = index
            _ = take(.minus)
            let firstDigit = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
            let digits = index - firstDigit
            guard digits > 0, digits == 1 || bytes[firstDigit] != 0x30, index < bytes.count,
                bytes[index] == .comma || bytes[index] == .closeBrace
            else { return nil }
            return Int64(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
        }
    }
}

extension UInt8 {
    fileprivate static let quote = UInt8(ascii: "\"")
    fileprivate static let backslash = UInt8(ascii: "\\")
    fileprivate static let comma = UInt8(ascii: ",")
    fileprivate static let colon = UInt8(ascii: ":")
    fileprivate static let minus = UInt8(ascii: "-")
    fileprivate static let openBracket = UInt8(ascii: "[")
    fileprivate static let closeBracket = UInt8(ascii: "]")
    fileprivate static let openBrace = UInt8(ascii: "{")
    fileprivate static let closeBrace = UInt8(ascii: "}")
}

extension PackedToken {
    /// A token read from a record: packed straight from its bytes when they are ASCII; nil when they are not valid
    /// UTF-8.
    fileprivate static func make(_ span: (bytes: UnsafeBufferPointer<UInt8>, isASCII: Bool), kind: SubscriberKind) -> PackedToken? {
        if span.isASCII { return make(bytes: span.bytes, kind: kind) }
        return String(validating: span.bytes, as: UTF8.self).map { make($0, kind: kind) }
    }
}
