import JOSE
import PushCore
import SSLCrypto

/// The v2 data payloads: `{"srv":"webcom","kid":KID,"evt":EVT,"ver":"v2"}`, `kid` only when encrypted for a key
/// that has one (a device key may have none).
///
/// `evt` is the event JSON (`V2Event`) as a compact JOSE object: an unsecured JWS (`{"alg":"none"}`, empty
/// signature) without a key, a JWE (`A256GCM`; `dir`, `A256KW`, `RSA-OAEP-256` or, for a device key,
/// `ECDH-ES+A256KW`) with one.
///
/// The size rules of v1 apply to the whole payload, envelope included: from 4064 bytes on, a value is sent
/// without `v` (`TooBig`), a childEvent with keys only (`OnlyKeys`) and then with no changes (`TooBig`);
/// nothing is sent above 4093 bytes. Sizes are computed, never measured by encrypting: the chosen form is
/// encrypted once.
public enum V2Payload {
    public static let server = "webcom"
    public static let version = "v2"

    /// Builds the data payload for `content`, encrypted for `key` when there is one. Returns nil only when even
    /// the smallest form is longer than `maximumSize` (4093 bytes but for Web Push: an app id, path or subscription
    /// id far too long). Throws only when encryption fails (no randomness, an OpenSSL failure).
    public static func build(
        app: String, path: DataPath, subscriptionID: String, content: NotificationContent, key: JWEKey?,
        maximumSize: Int = DataPayload.maximumSize
    ) throws -> DataPayload? {
        let threshold = DataPayload.degradeThreshold(forMaximum: maximumSize)
        let overhead = envelopeSize(kid: key?.headerKid)
        var chosen: [UInt8]? = nil
        var chosenSize = 0
        for degrade in V2Event.forms(for: content) {
            let event = V2Event.bytes(
                app: app, path: path, subscriptionID: subscriptionID, content: content, degrade: degrade)
            chosen = event
            chosenSize = overhead + compactLength(eventLength: event.count, key: key)
            if chosenSize < threshold { break }
        }
        guard let event = chosen, chosenSize <= maximumSize else { return nil }

        let evt: String
        if let key {
            evt = try JWE.encrypt(payload: event, key: key)
        } else {
            evt = JWS.unsecured(payload: event)
        }
        let payload = envelope(kid: key?.headerKid, evt: evt)
        assert(payload.serializedSize == chosenSize, "v2 payload size arithmetic is off")
        return payload
    }

    /// The data payload around a compact `evt`, fields in order `srv`, `kid`, `evt`, `ver`.
    public static func envelope(kid: String?, evt: String) -> DataPayload {
        var fields: [DataPayload.Field] = [.init("srv", server)]
        if let kid { fields.append(.init("kid", kid)) }
        fields.append(.init("evt", evt))
        fields.append(.init("ver", version))
        return DataPayload(fields)
    }

    /// Size of the payload with an empty `evt`: a compact JOSE object is ASCII letters, digits, `-`, `_` and
    /// `.`, none escaped in JSON, so the full size is this plus the length of `evt`.
    static func envelopeSize(kid: String?) -> Int {
        envelope(kid: kid, evt: "").serializedSize
    }

    /// Length of the compact JOSE object that carries `eventLength` bytes.
    static func compactLength(eventLength: Int, key: JWEKey?) -> Int {
        guard let key else { return JWS.unsecuredLength(payloadLength: eventLength) }
        return JWE.compactLength(payloadLength: eventLength, key: key)
    }
}
