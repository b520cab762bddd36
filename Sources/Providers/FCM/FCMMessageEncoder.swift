import CompactJSON
import SSLCrypto

/// Builds FCM HTTP v1 `messages:send` request bodies by hand (compact JSON, no Foundation).
///
/// The body is exactly
/// `{"message":{"token":"<t>","data":{<data>},"android":{"priority":"high"},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1}}}}}`:
/// a data message, high priority on Android, and a background (silent) push through APNs on iOS. With
/// `validateOnly` the body starts `{"validate_only":true,"message":…`: FCM checks the request (credentials,
/// project, message, token) without delivering it. String escaping is described on ``encodeData(_:)``.
///
/// With ``DeliveryOptions`` (a user notification's TTL and collapse key) the message gains, after the fixed
/// members: `"ttl":"<s>s"` and `"collapse_key":"<key>"` in `android`; `"apns-expiration":"<now + ttl>"` (unix
/// seconds; `"0"` for a TTL of 0: APNs tries once) and `"apns-collapse-id":"<key>"` in `apns.headers`. APNs
/// takes at most 64 bytes of collapse id: a longer key is sent as ``apnsCollapseID(_:)``. No `webpush` block is
/// sent, so there is no webpush `TTL` header. Without options the bytes are exactly the ones above.
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
    /// With `options`, their fields (see the type's documentation); `now` (unix seconds, by default the wall
    /// clock's) dates `apns-expiration`.
    public static func encodeMessage(
        token: String, dataJSON: some Collection<UInt8>, validateOnly: Bool = false, options: DeliveryOptions = .none,
        now: Int64 = Int64(WallClock.now())
    ) -> [UInt8] {
        var writer = JSONStreamWriter(
            reservingCapacity: 256 + token.utf8.count + dataJSON.count + 2 * (options.collapseKey?.utf8.count ?? 0))
        writeMessage(token: token, validateOnly: validateOnly, options: options, now: now, into: &writer) { $0.raw(dataJSON) }
        return writer.bytes
    }

    /// The longest `apns-collapse-id` APNs accepts (bytes).
    public static let maximumAPNsCollapseIDBytes = 64

    /// The `apns-collapse-id` for a collapse key: the key itself up to 64 bytes; a longer key, the base64url of
    /// its SHA-256 (43 characters), so that the same key always gives the same id and different keys (almost
    /// surely) different ones. (Cutting the key instead would make keys with a common 64-byte prefix replace
    /// each other.)
    public static func apnsCollapseID(_ key: String) -> String {
        key.utf8.count <= maximumAPNsCollapseIDBytes ? key : Base64URL.encode(SHA256.hash(Array(key.utf8)))
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
        token: String, validateOnly: Bool = false, options: DeliveryOptions = .none, now: Int64 = 0,
        into writer: inout JSONStreamWriter, data: (inout JSONStreamWriter) -> Void
    ) {
        writer.raw(validateOnly ? #"{"validate_only":true,"message":{"token":"# : #"{"message":{"token":"#)
        writer.string(token)
        writer.raw(#","data":"#)
        data(&writer)
        writer.raw(#","android":{"priority":"high""#)
        if let ttl = options.ttlSeconds {
            writer.raw(#","ttl":"#)
            writer.string(DeliveryOptions.durationText(ttl))
        }
        if let key = options.collapseKey {
            writer.raw(#","collapse_key":"#)
            writer.string(key)
        }
        writer.raw(#"},"apns":{"headers":{"apns-push-type":"background","apns-priority":"5""#)
        if let ttl = options.ttlSeconds {
            writer.raw(#","apns-expiration":"#)
            writer.string(ttl <= 0 ? "0" : String(now + Int64(ttl)))
        }
        if let key = options.collapseKey {
            writer.raw(#","apns-collapse-id":"#)
            writer.string(apnsCollapseID(key))
        }
        writer.raw(#"},"payload":{"aps":{"content-available":1}}}}}"#)
    }
}
