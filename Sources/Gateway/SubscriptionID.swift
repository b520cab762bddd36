import PushCore
import SSLCrypto

/// The v2 subscription id: a deterministic function of the 6-tuple (app, uid, kind, destination, path,
/// context), the same on every replica and across restarts. It is base64url of the first 16 bytes of the
/// SHA-256 of the tuple, each part length-prefixed so that no two tuples share an encoding (22 characters).
enum SubscriptionID {
    static func make(app: String, uid: String, kind: SubscriberKind, destination: String = "", path: DataPath, context: String) -> String {
        let pathText = path.description
        var material: [UInt8] = []
        // One allocation: made once per v2 notification (its `subscriptionId`).
        material.reserveCapacity(
            domain.count + 6 * 4 + app.utf8.count + uid.utf8.count + kind.rawValue.utf8.count + destination.utf8.count
                + pathText.utf8.count + context.utf8.count)
        material.append(contentsOf: domain)
        func append(_ part: String) {
            let count = UInt32(truncatingIfNeeded: part.utf8.count)
            material.append(UInt8(count >> 24))
            material.append(UInt8((count >> 16) & 0xFF))
            material.append(UInt8((count >> 8) & 0xFF))
            material.append(UInt8(count & 0xFF))
            material.append(contentsOf: part.utf8)
        }
        append(app)
        append(uid)
        append(kind.rawValue)
        append(destination)
        append(pathText)
        append(context)
        return Base64URL.encode(SHA256.hash(material).prefix(16))
    }

    private static let domain: [UInt8] = Array("pushgateway-subscription-v2".utf8)

    static func make(app: String, path: DataPath, subscriber: SubscriberKey) -> String {
        let (destination, context) = subscriber.destinationAndContext
        return make(
            app: app, uid: subscriber.uid ?? "", kind: subscriber.kind, destination: String(destination), path: path,
            context: String(context))
    }
}
