import CompactJSON
import JOSE
import SSLCrypto

/// Why a received payload could not be decoded.
public struct PayloadDecodingError: Error, CustomStringConvertible, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }

    /// The one error for a key that does not open the payload (or a payload that was altered).
    public static let wrongKey = PayloadDecodingError("cannot decrypt: wrong key or tampered payload")
}

/// Decodes what a device received, for app developers: a v2 data map
/// (`{"srv":"webcom","kid":"k1","evt":"…","ver":"v2"}`), a bare compact `evt`, or a v1 data map; an FCM
/// message around the map (`{"data":{…}}`, `{"message":{"data":{…}}}`) is unwrapped.
public enum PayloadDecoder {
    public enum Format: String, Sendable {
        case v1
        case v2
    }

    /// A decoded payload.
    public struct Decoded: Sendable, Equatable {
        public var format: Format
        /// The key the event was encrypted for; nil when it was not encrypted (v1, or v2 unsecured JWS).
        public var kid: String?
        /// v2: the event JSON. v1: the data map with `d`, `added`, `removed` and `changed` parsed into JSON.
        public var event: JSONValue
    }

    /// The event as indented, human-readable JSON, members in the payload's order.
    public static func decode(payload: String, keys: [JWEKey]) throws(PayloadDecodingError) -> String {
        let decoded = try decodeEvent(payload: payload, keys: keys)
        return PrettyJSON.string(decoded.event, order: decoded.format == .v2 ? v2Order : v1Order)
    }

    /// Member order of the v2 event (`c` holds `a`, `r`, `c` in that order).
    static let v2Order = PrettyJSON.Order(
        order: ["t", "m", "a", "v", "c", "r", "s", "p", "id"], nested: ["c": PrettyJSON.Order(order: ["a", "r", "c"])])
    /// Member order of v1 data maps.
    static let v1Order = PrettyJSON.Order(order: ["s", "t", "r", "app", "sp", "d", "added", "removed", "changed"])

    /// Decodes `payload`, choosing among `keys` by the `kid` of an encrypted event.
    public static func decodeEvent(payload: String, keys: [JWEKey]) throws(PayloadDecodingError) -> Decoded {
        let text = trimmed(payload)
        guard !text.isEmpty else { throw PayloadDecodingError("the payload is empty") }
        guard text.hasPrefix("{") || text.hasPrefix("\"") else {
            return try v2(evt: String(text), envelopeKid: nil, keys: keys)
        }
        let document: JSONValue
        do {
            document = try JSONParser.parse(String(text), rejectDuplicateKeys: true)
        } catch {
            throw PayloadDecodingError("the payload is not JSON: \(error)")
        }
        switch document {
        case .string(let evt): return try v2(evt: evt, envelopeKid: nil, keys: keys)
        case .object(let members): return try dataMap(members, keys: keys, depth: 0)
        default: throw PayloadDecodingError("the payload must be a data map (a JSON object) or a compact evt string")
        }
    }

    private static func dataMap(
        _ members: [ExactString: JSONValue], keys: [JWEKey], depth: Int
    ) throws(PayloadDecodingError) -> Decoded {
        if let evt = members["evt"] {
            guard case .string(let compact) = evt else { throw PayloadDecodingError("field \"evt\" must be a string") }
            switch members["ver"] {
            case nil, .string("v2"): break
            case .string(let version): throw PayloadDecodingError("unsupported version \"ver\":\"\(version)\" (expected \"v2\")")
            default: throw PayloadDecodingError("field \"ver\" must be a string")
            }
            let kid: String?
            switch members["kid"] {
            case nil: kid = nil
            case .string(let text): kid = text
            default: throw PayloadDecodingError("field \"kid\" must be a string")
            }
            return try v2(evt: compact, envelopeKid: kid, keys: keys)
        }
        if members["t"] != nil { return try v1(members) }
        if depth < 2 {
            if case .object(let inner)? = members["data"] { return try dataMap(inner, keys: keys, depth: depth + 1) }
            if case .object(let inner)? = members["message"] { return try dataMap(inner, keys: keys, depth: depth + 1) }
        }
        throw PayloadDecodingError("not a notification payload: no \"evt\" field (v2) and no \"t\" field (v1)")
    }

    // MARK: v1

    private static func v1(_ members: [ExactString: JSONValue]) throws(PayloadDecodingError) -> Decoded {
        var event = members
        for field: ExactString in ["d", "added", "removed", "changed"] {
            guard let member = members[field] else { continue }
            guard case .string(let text) = member else {
                throw PayloadDecodingError("v1 field \"\(field)\" must be a string holding JSON text")
            }
            do {
                event[field] = try JSONParser.parse(text)
            } catch {
                throw PayloadDecodingError("v1 field \"\(field)\" does not hold JSON text: \(error)")
            }
        }
        return Decoded(format: .v1, kid: nil, event: .object(event))
    }

    // MARK: v2

    private static func v2(evt: String, envelopeKid: String?, keys: [JWEKey]) throws(PayloadDecodingError) -> Decoded {
        let parts = evt.split(separator: ".", omittingEmptySubsequences: false)
        let bytes: [UInt8]
        var kid: String? = nil
        switch parts.count {
        case 3:
            if let envelopeKid {
                throw PayloadDecodingError("the payload names kid \"\(envelopeKid)\" but its evt is not encrypted")
            }
            do {
                bytes = try JWS.decodeUnsecured(compact: evt)
            } catch {
                throw PayloadDecodingError("invalid evt: \(error)")
            }
        case 5:
            let header = try protectedHeader(parts[0])
            kid = header.kid
            if let envelopeKid, envelopeKid != header.kid {
                let inside = header.kid.map { "\"\($0)\"" } ?? "none"
                throw PayloadDecodingError("the payload names kid \"\(envelopeKid)\" but its evt was encrypted for kid \(inside)")
            }
            let key = try choose(kid: header.kid, from: keys)
            guard key.algorithm.rawValue == header.alg else {
                throw PayloadDecodingError(
                    "\(PayloadDecodingError.wrongKey.message) (the evt uses \(header.alg), key \"\(key.kid)\" is \(key.algorithm.rawValue))")
            }
            if let encryptedKey = Base64URL.decode(parts[1]), encryptedKey.count != key.encryptedKeyByteCount {
                throw PayloadDecodingError(
                    "\(PayloadDecodingError.wrongKey.message) (its encrypted key is \(encryptedKey.count) bytes, key \"\(key.kid)\" needs \(key.encryptedKeyByteCount))")
            }
            do {
                bytes = try JWE.decrypt(compact: evt, keys: { _ in key })
            } catch {
                if (error as? JOSEError)?.message == "JWE: decryption failed" { throw PayloadDecodingError.wrongKey }
                throw PayloadDecodingError("cannot decrypt: \(error)")
            }
        default:
            throw PayloadDecodingError(
                "evt is not a compact JOSE object (3 dot-separated parts for a JWS, 5 for a JWE; found \(parts.count))")
        }
        let event: JSONValue
        do {
            event = try JSONParser.parse(bytes)
        } catch {
            throw PayloadDecodingError("the event inside evt is not JSON: \(error)")
        }
        guard case .object = event else { throw PayloadDecodingError("the event inside evt is not a JSON object") }
        return Decoded(format: .v2, kid: kid, event: event)
    }

    private static func protectedHeader(_ part: Substring) throws(PayloadDecodingError) -> (alg: String, kid: String?) {
        guard let json = Base64URL.decode(part),
              case .object(let header)? = try? JSONParser.parse(json)
        else { throw PayloadDecodingError("invalid evt: its JWE protected header is not base64url JSON") }
        guard case .string(let alg)? = header["alg"] else {
            throw PayloadDecodingError("invalid evt: its JWE protected header has no \"alg\"")
        }
        switch header["kid"] {
        case nil: return (alg, nil)
        case .string(let kid)?: return (alg, kid)
        default: throw PayloadDecodingError("invalid evt: its JWE protected header has a \"kid\" that is not a string")
        }
    }

    private static func choose(kid: String?, from keys: [JWEKey]) throws(PayloadDecodingError) -> JWEKey {
        let named = kid.map { "kid \"\($0)\"" } ?? "no kid"
        guard !keys.isEmpty else {
            throw PayloadDecodingError("the payload is encrypted (\(named)) and no key was given")
        }
        if let kid {
            guard let key = keys.first(where: { $0.kid == kid }) else {
                let known = keys.map { "\"\($0.kid)\"" }.joined(separator: ", ")
                throw PayloadDecodingError("unknown kid \"\(kid)\": no key given has it (keys given: \(known))")
            }
            return key
        }
        guard keys.count == 1, let only = keys.first else {
            throw PayloadDecodingError("the payload is encrypted with no kid: give exactly one key")
        }
        return only
    }

    private static func trimmed(_ text: String) -> Substring {
        let isSpace: (Character) -> Bool = { $0.isWhitespace }
        guard let start = text.firstIndex(where: { !isSpace($0) }),
              let end = text.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return text[start...end]
    }
}
