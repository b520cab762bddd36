import CompactJSON
import JOSE

/// An app's encryption keys for v2 payloads: every key it may still decrypt with, by `kid`, and the one new
/// payloads are encrypted for. Rotating a key: add the new key, make it `active`, remove the old one once the
/// devices no longer need it.
public struct AppEncryptionKeys: Sendable {
    /// Every key, by `kid`.
    public let keys: [String: JWEKey]
    /// The key new payloads are encrypted for; nil: payloads are not encrypted (unsecured JWS).
    public let active: JWEKey?

    /// No keys: v2 payloads are sent unencrypted.
    public static let none = AppEncryptionKeys(validatedKeys: [:], active: nil)

    private init(validatedKeys: [String: JWEKey], active: JWEKey?) {
        self.keys = validatedKeys
        self.active = active
    }

    /// `keys` (distinct `kid`s) with the one named `activeKid` active; `activeKid` nil: no encryption.
    public init(keys: [JWEKey], activeKid: String?) throws(EncryptionKeyError) {
        var byKid: [String: JWEKey] = [:]
        for key in keys {
            guard byKid[key.kid] == nil else { throw EncryptionKeyError("key \"\(key.kid)\": field \"kid\" is used twice") }
            byKid[key.kid] = key
        }
        var active: JWEKey? = nil
        if let activeKid {
            guard let key = byKid[activeKid] else {
                let known = keys.isEmpty ? "there are no keys" : "keys: " + keys.map(\.kid).joined(separator: ", ")
                throw EncryptionKeyError("field \"active\": no key has kid \"\(activeKid)\" (\(known))")
            }
            active = key
        }
        self.init(validatedKeys: byKid, active: active)
    }

    /// Reads the settings object `{"active": "k2", "keys": [JWK, …]}` (see `JWK` for the key forms).
    ///
    /// `active` must name one of the keys; without `active` (or with `null`) payloads are not encrypted and
    /// `keys` may be empty or absent. Unknown members are refused, so that a misspelt `active` is not taken
    /// for "no encryption".
    public static func parse(_ settings: JSONValue) throws(EncryptionKeyError) -> AppEncryptionKeys {
        guard case .object(let members) = settings else {
            throw EncryptionKeyError("encryption settings must be a JSON object {\"active\": …, \"keys\": […]}")
        }
        for name in JSONWriter.sortedKeys(members) where name != "active" && name != "keys" {
            throw EncryptionKeyError("encryption settings: unknown field \"\(name)\" (expected \"active\" and \"keys\")")
        }
        var keys: [JWEKey] = []
        switch members["keys"] {
        case nil, .null: break
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                keys.append(try JWK.key(element, at: "keys[\(index)]"))
            }
        default: throw EncryptionKeyError("encryption settings: field \"keys\" must be an array of JWKs")
        }
        let activeKid: String?
        switch members["active"] {
        case nil, .null: activeKid = nil
        case .string(let kid): activeKid = kid
        default: throw EncryptionKeyError("encryption settings: field \"active\" must be a kid (a string)")
        }
        return try AppEncryptionKeys(keys: keys, activeKid: activeKid)
    }

    /// The key named `kid`.
    public func key(kid: String) -> JWEKey? { keys[kid] }
}
