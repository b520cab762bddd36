import CompactJSON

/// Builds Huawei Push Kit v1 `messages:send` request bodies by hand (compact JSON, no Foundation).
///
/// The body is exactly
/// `{"validate_only":false,"message":{"data":"<data>","android":{"urgency":"HIGH"},"token":["<t>"]}}`:
/// a data message (HMS wants `data` as a string: the compact JSON data object, escaped as a JSON string by
/// ``JSONWriter/writeString(_:into:)``), high urgency, to one token. With `validateOnly`, `"validate_only":true`:
/// a test message, checked by HMS and delivered to no device.
public enum HMSMessageEncoder {
    /// The complete request body for `token` with an already serialised data object (`{"k":"v",...}`, e.g.
    /// the payload whose size was checked), written as the JSON string value of `data`. The bytes are read
    /// as UTF-8 (invalid sequences would become U+FFFD; the gateway's payloads are always valid UTF-8).
    public static func encodeMessage(token: String, dataJSON: some Collection<UInt8>, validateOnly: Bool = false) -> [UInt8] {
        encodeMessage(token: token, dataString: String(decoding: dataJSON, as: UTF8.self), validateOnly: validateOnly)
    }

    /// The complete request body for `token` with `data` pairs (string values, in this order), serialised as
    /// ``FCMMessageEncoder/encodeData(_:)`` does.
    public static func encodeMessage(token: String, data: [(key: String, value: String)]) -> [UInt8] {
        encodeMessage(token: token, dataJSON: FCMMessageEncoder.encodeData(data))
    }

    private static func encodeMessage(token: String, dataString: String, validateOnly: Bool = false) -> [UInt8] {
        var writer = JSONStreamWriter(
            reservingCapacity: 128 + token.utf8.count + JSONWriter.stringLiteralLength(dataString))
        writer.raw(validateOnly ? #"{"validate_only":true,"message":{"data":"# : #"{"validate_only":false,"message":{"data":"#)
        writer.string(dataString)
        writer.raw(#","android":{"urgency":"HIGH"},"token":["#)
        writer.string(token)
        writer.raw("]}}")
        return writer.bytes
    }
}
