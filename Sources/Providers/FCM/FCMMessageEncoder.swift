import CompactJSON

/// Builds FCM HTTP v1 `messages:send` request bodies by hand (compact JSON, no Foundation).
///
/// The body is exactly
/// `{"message":{"token":"<t>","data":{<data>},"android":{"priority":"high"},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1}}}}}`:
/// a data message, high priority on Android, and a background (silent) push through APNs on iOS. With
/// `validateOnly` the body starts `{"validate_only":true,"message":…`: FCM checks the request (credentials,
/// project, message, token) without delivering it. String escaping is described on ``encodeData(_:)``.
public enum FCMMessageEncoder {
    /// Encodes data pairs as a compact JSON object, in the given order: `{"k1":"v1","k2":"v2"}`.
    ///
    /// Escaping: `"` and `\` are backslash-escaped, control characters become `\b \f \n \r \t` or `\u00XX`,
    /// everything else (`/` and non-ASCII included) is written as UTF-8. This is also the serialisation whose
    /// size FCM's 4 KB data limit is measured on. Keys are not de-duplicated.
    public static func encodeData(_ data: [(key: String, value: String)]) -> [UInt8] {
        var writer = JSONStreamWriter(reservingCapacity: 64 + data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 6 })
        writeData(data, into: &writer)
        return writer.bytes
    }

    /// The complete request body for `token` with `data` (see the type's documentation).
    public static func encodeMessage(token: String, data: [(key: String, value: String)]) -> [UInt8] {
        var writer = JSONStreamWriter(reservingCapacity: 256 + token.utf8.count + data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 6 })
        writeMessage(token: token, into: &writer) { writeData(data, into: &$0) }
        return writer.bytes
    }

    /// The complete request body for `token` with an already serialised data object (`{...}`, e.g. from
    /// ``encodeData(_:)``), copied verbatim.
    public static func encodeMessage(token: String, dataJSON: some Collection<UInt8>, validateOnly: Bool = false) -> [UInt8] {
        var writer = JSONStreamWriter(reservingCapacity: 256 + token.utf8.count + dataJSON.count)
        writeMessage(token: token, validateOnly: validateOnly, into: &writer) { $0.raw(dataJSON) }
        return writer.bytes
    }

    private static func writeData(_ data: [(key: String, value: String)], into writer: inout JSONStreamWriter) {
        writer.raw("{")
        for (index, pair) in data.enumerated() {
            if index > 0 { writer.raw(",") }
            writer.string(pair.key)
            writer.raw(":")
            writer.string(pair.value)
        }
        writer.raw("}")
    }

    private static func writeMessage(
        token: String, validateOnly: Bool = false, into writer: inout JSONStreamWriter, data: (inout JSONStreamWriter) -> Void
    ) {
        writer.raw(validateOnly ? #"{"validate_only":true,"message":{"token":"# : #"{"message":{"token":"#)
        writer.string(token)
        writer.raw(#","data":"#)
        data(&writer)
        writer.raw(
            #","android":{"priority":"high"},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1}}}}}"#
        )
    }
}
