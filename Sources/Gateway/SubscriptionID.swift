import PushCore
import SSLCrypto

/// The v2 subscription id: a deterministic function of the 6-tuple (app, uid, kind, destination, path,
/// context), the same on every replica and across restarts. It is base64url of the first 16 bytes of the
/// SHA-256 of the tuple, each part length-prefixed so that no two tuples share an encoding (22 characters).
enum SubscriptionID {
    static func make(app: String, uid: String, kind: SubscriberKind, destination: String = "", path: DataPath, context: String) -> String {
        var material: [UInt8] = Array("pushgateway-subscription-v2".utf8)
        for part in [app, uid, kind.rawValue, destination, path.description, context] {
            let bytes = Array(part.utf8)
            let count = UInt32(truncatingIfNeeded: bytes.count)
            material.append(contentsOf: [UInt8(count >> 24), UInt8((count >> 16) & 0xFF), UInt8((count >> 8) & 0xFF), UInt8(count & 0xFF)])
            material.append(contentsOf: bytes)
        }
        return Base64URL.encode(SHA256.hash(material).prefix(16))
    }

    static func make(app: String, path: DataPath, subscriber: SubscriberKey) -> String {
        make(
            app: app, uid: subscriber.uid ?? "", kind: subscriber.kind, destination: String(subscriber.destination), path: path,
            context: String(subscriber.context))
    }
}
