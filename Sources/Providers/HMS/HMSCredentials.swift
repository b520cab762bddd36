/// The credentials of one Huawei app (AppGallery Connect, project settings / general information).
///
/// `appId` names the app in the send URL (`/v1/{appId}/messages:send`); `clientId` and `clientSecret` (the
/// "App ID" / "Client ID" and "App secret" / "Client secret") obtain OAuth 2.0 access tokens. For most apps
/// `clientId` equals `appId`. The description never shows the secret.
public struct HMSCredentials: Sendable, CustomStringConvertible {
    /// The app the messages are sent for.
    public var appId: String
    /// The OAuth 2.0 client ID.
    public var clientId: String
    /// The OAuth 2.0 client secret.
    public var clientSecret: String

    public init(appId: String, clientId: String, clientSecret: String) {
        self.appId = appId
        self.clientId = clientId
        self.clientSecret = clientSecret
    }

    public var description: String {
        "HMSCredentials(appId: \(appId), clientId: \(clientId), clientSecret: \(Redaction.fingerprint(clientSecret)))"
    }
}
