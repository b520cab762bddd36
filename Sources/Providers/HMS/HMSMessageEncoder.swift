import CompactJSON

/// Builds Huawei Push Kit v1 `messages:send` request bodies by hand (compact JSON, no Foundation).
///
/// The body is exactly
/// `{"validate_only":false,"message":{"data":"<data>","android":{"urgency":"HIGH"},"token":["<t>"]}}`:
/// a data message (HMS wants `data` as a string: the compact JSON data object, escaped as a JSON string by
/// ``JSONWriter/writeString(_:into:)``), high urgency, to one token. With `validateOnly`, `"validate_only":true`:
/// a test message, checked by HMS and delivered to no device.
///
/// With ``DeliveryOptions`` (a user notification's TTL and collapse key), `android` gains, after `urgency`:
/// `"ttl":"<s>s"`, at most 15 days (``maximumTTLSeconds``: HMS keeps messages no longer), and
/// `"collapse_key":<n>` when the key is ``hmsCollapseKey(_:)`` (HMS's collapse key is a group number, −1…100).
/// Without options the bytes are exactly the ones above.
public enum HMSMessageEncoder {
    /// The complete request body for `token` with an already serialised data object (`{"k":"v",...}`, e.g.
    /// the payload whose size was checked), written as the JSON string value of `data`. The bytes are read
    /// as UTF-8 (invalid sequences would become U+FFFD; the gateway's payloads are always valid UTF-8).
    public static func encodeMessage(
        token: String, dataJSON: some Collection<UInt8>, validateOnly: Bool = false, options: DeliveryOptions = .none
    ) -> [UInt8] {
        encodeMessage(token: token, dataString: String(decoding: dataJSON, as: UTF8.self), validateOnly: validateOnly, options: options)
    }

    /// The longest TTL HMS keeps a message for an offline device: 15 days. A longer one is sent as this.
    public static let maximumTTLSeconds = 1_296_000

    /// HMS's `android.collapse_key` for a collapse key: HMS takes an integer, −1 (keep every message) or a group
    /// 0…100 (only the group's latest message is kept). A key that is such a number in decimal (`"7"`, `"-1"`; no
    /// sign `+`, no leading zeros) is sent as that number; any other key is not sent (nil), so HMS keeps every
    /// message. Hashing other keys into 0…100 was rejected: with 101 groups, unrelated keys would collide and a
    /// message would silently replace another that has nothing to do with it.
    public static func hmsCollapseKey(_ key: String) -> Int? {
        // Int(_:) also reads "+7" and "007": only the canonical spelling of the number counts.
        guard let value = Int(key), (-1...100).contains(value), String(value) == key else { return nil }
        return value
    }

    /// The complete request body for `token` with `data` pairs (string values, in this order), serialised as
    /// ``FCMMessageEncoder/encodeData(_:)`` does.
    public static func encodeMessage(token: String, data: [(key: String, value: String)]) -> [UInt8] {
        encodeMessage(token: token, dataJSON: FCMMessageEncoder.encodeData(data))
    }

    private static func encodeMessage(
        token: String, dataString: String, validateOnly: Bool = false, options: DeliveryOptions = .none
    ) -> [UInt8] {
        var writer = JSONStreamWriter(
            reservingCapacity: 160 + token.utf8.count + JSONWriter.stringLiteralLength(dataString))
        writer.raw(validateOnly ? #"{"validate_only":true,"message":{"data":"# : #"{"validate_only":false,"message":{"data":"#)
        writer.string(dataString)
        writer.raw(#","android":{"urgency":"HIGH""#)
        if let ttl = options.ttlSeconds {
            writer.raw(#","ttl":"#)
            writer.string(DeliveryOptions.durationText(min(ttl, maximumTTLSeconds)))
        }
        if let key = options.collapseKey.flatMap(hmsCollapseKey) {
            writer.raw(#","collapse_key":"#)
            writer.raw(Array(String(key).utf8))
        }
        writer.raw(#"},"token":["#)
        writer.string(token)
        writer.raw("]}}")
        return writer.bytes
    }
}
