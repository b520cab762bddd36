// TEMPORARY STUB (replaced by the real implementation)
import JOSE
import PushCore
public enum V2Payload {
    public static func build(app: String, path: DataPath, subscriptionID: String, content: NotificationContent, key: JWEKey?) throws -> DataPayload? { nil }
}
