import CurlHTTP
import Foundation
import Gateway
import Logging
import Providers
import SSLCrypto
import WebPush
import Yams

/// `push-gateway check-credentials APP`: checks an app's settings and provider credentials before real traffic.
///
/// 1. The app's settings, as the gateway would serve them (a file of `appSettings.directory` overriding the
///    configuration's `apps` entry), are parsed and compiled: auth keys, rules, encryption keys, credential files.
/// 2. FCM (when the app has a service account): an OAuth access token is fetched, then one `validate_only`
///    message is sent, which FCM checks (credentials, project, API enabled, message, device token) and delivers
///    to nobody.
/// 3. HMS (when the app has HMS credentials): the same with a token from Huawei's OAuth endpoint and a
///    `validate_only: true` test message.
/// 4. APNs (when the app has `apns` settings): a provider token is signed with the `.p8` key and a background push
///    is sent to ``apnsPlaceholderToken``, a device token no device has. APNs checks the token and the topic before
///    the device, so its `BadDeviceToken` says the credentials and the bundle id were accepted; nothing is delivered.
/// 5. Web Push (when the app has `webPush` settings): the VAPID key is read, signs a token, and the token's
///    signature verifies with the key's public half, which is printed (the pages' `applicationServerKey`). No push
///    service is called: each browser's endpoint is its own.
///
/// Without a device token the dry runs use ``placeholderToken``: the provider then refuses the device token,
/// which proves that it accepted our credentials and request. Nothing is sent to any device either way.
struct CredentialsCheck: Sendable {
    /// One line of the report.
    struct Finding: Sendable, Equatable, CustomStringConvertible {
        enum Status: String, Sendable { case ok = "ok", failed = "FAILED" }
        /// `settings`, `fcm`, `hms`, `apns` or `webpush`.
        let subject: String
        let status: Status
        let message: String

        var description: String {
            "\(subject.padding(toLength: 9, withPad: " ", startingAt: 0)) \(status.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0)) \(message)"
        }
    }

    /// The device token of a dry run when none is given: no provider knows it.
    static let placeholderToken = "push-gateway-check-credentials"
    /// The data of the dry-run message.
    static let dryRunData = Array(#"{"check":"credentials"}"#.utf8)

    let configuration: GatewayConfiguration
    let logger: Logger

    init(configuration: GatewayConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Runs the checks of `app`; the dry runs address `fcmToken` / `hmsToken` when given.
    func run(app: String, fcmToken: String? = nil, hmsToken: String? = nil) async -> [Finding] {
        let http: HTTPClient
        do {
            http = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    maxConnectionsPerHost: 1, caFile: configuration.fcm.caFile.isEmpty ? nil : configuration.fcm.caFile),
                logger: logger)
        } catch {
            return [Finding(subject: "settings", status: .failed, message: "cannot start the HTTP client: \(error)")]
        }
        var findings: [Finding] = []
        if let settings = settings(of: app, http: http, into: &findings) {
            if !settings.fcmServiceAccountFile.isEmpty {
                findings += await checkFCM(accountFile: settings.fcmServiceAccountFile, token: fcmToken, http: http)
            }
            if let hms = settings.hms {
                findings += await checkHMS(hms, token: hmsToken, http: http)
            }
            if let apns = settings.apns {
                findings.append(await checkAPNs(apns, http: http))
            }
            if let webPush = settings.webPush {
                findings.append(Self.checkWebPush(webPush))
            }
            if settings.fcmServiceAccountFile.isEmpty && settings.hms == nil {
                findings.append(
                    Finding(
                        subject: "settings", status: .ok,
                        message: "no FCM or HMS credentials: notifications go to the console sink (standard output)"))
            }
        }
        await http.shutdown()
        return findings
    }

    // MARK: Settings

    /// The app's settings (file over inline entry), compiled as the gateway compiles them; nil when they fail.
    private func settings(of app: String, http: HTTPClient, into findings: inout [Finding]) -> AppSettings? {
        var settings = configuration.apps[app]
        var origin = "apps.\(app) of the configuration"
        if let file = settingsFile(of: app) {
            do {
                let text = try String(contentsOfFile: file, encoding: .utf8)
                settings = try YAMLDecoder().decode(AppSettings.self, from: text)
                origin = file
            } catch {
                findings.append(Finding(subject: "settings", status: .failed, message: "\(file): \(error)"))
                return nil
            }
        }
        guard let settings else {
            let directory = configuration.appSettings.directory
            findings.append(
                Finding(
                    subject: "settings", status: .failed,
                    message: "no app \(app): not in `apps` and no \(app).yaml|.yml|.json in "
                        + (directory.isEmpty ? "appSettings.directory (unset)" : directory)))
            return nil
        }
        let builder = AppProfileBuilder(httpClient: http, fcm: fcmConfiguration, hms: hmsConfiguration, logger: logger)
        do {
            _ = try builder.build(name: app, settings: settings, previous: nil)
        } catch {
            findings.append(Finding(subject: "settings", status: .failed, message: "\(origin): \(error)"))
            return nil
        }
        findings.append(
            Finding(
                subject: "settings", status: .ok,
                message: "\(origin): valid (\(settings.authKeys.count) auth key(s), enabled: \(settings.enabled))"))
        return settings
    }

    private func settingsFile(of app: String) -> String? {
        let directory = configuration.appSettings.directory
        guard !directory.isEmpty else { return nil }
        return ["yaml", "yml", "json"].lazy.map { "\(directory)/\(app).\($0)" }.first {
            FileManager.default.fileExists(atPath: $0)
        }
    }

    private var fcmConfiguration: FCMConfiguration {
        FCMConfiguration(
            baseURL: configuration.fcm.baseURL, tokenURL: configuration.fcm.tokenURL.isEmpty ? nil : configuration.fcm.tokenURL,
            requestTimeout: .milliseconds(configuration.fcm.requestTimeoutMs))
    }

    private var hmsConfiguration: HMSConfiguration {
        HMSConfiguration(
            baseURL: configuration.hms.baseURL, tokenURL: configuration.hms.tokenURL,
            requestTimeout: .milliseconds(configuration.hms.requestTimeoutMs))
    }

    // MARK: FCM

    private func checkFCM(accountFile: String, token: String?, http: HTTPClient) async -> [Finding] {
        let client: FCMClient
        let account: FCMServiceAccount
        do {
            account = try FCMServiceAccount(contentsOfFile: accountFile)
            client = try FCMClient(serviceAccount: account, httpClient: http, configuration: fcmConfiguration, logger: logger)
        } catch {
            return [Finding(subject: "fcm", status: .failed, message: "\(accountFile): \(error)")]
        }
        let failure = await Self.tokenFailure(client.tokenManager)
        let obtained = Self.tokenFinding(
            subject: "fcm", account: account.clientEmail, tokenURL: fcmConfiguration.tokenURL ?? account.tokenURI,
            failure: failure.map { (detail: $0.message, httpStatus: $0.httpStatus) })
        guard obtained.status == .ok else { return [obtained] }
        var findings = [obtained]
        let device = token ?? Self.placeholderToken
        switch await client.validate(token: device, dataJSON: Self.dryRunData) {
        case .sent:
            findings.append(
                Finding(
                    subject: "fcm", status: .ok,
                    message: "project \(account.projectID) accepted a validate_only message (delivered to nobody)"))
        case .failed(let error):
            findings.append(Self.dryRunFinding(
                subject: "fcm", project: "project \(account.projectID)", classification: error.classification,
                detail: Self.describe(error), placeholder: token == nil, hint: Self.fcmHint(error, project: account.projectID)))
        }
        return findings
    }

    static func describe(_ error: FCMError) -> String {
        var parts: [String] = []
        if let status = error.httpStatus { parts.append("HTTP \(status)") }
        if let code = error.code { parts.append(code.description) } else if let status = error.status { parts.append(status) }
        parts.append(error.message)
        return parts.joined(separator: " ")
    }

    static func fcmHint(_ error: FCMError, project: String) -> String {
        if error.code == .thirdPartyAuthError {
            return " (the APNs or web push credentials uploaded to the Firebase project are refused)"
        }
        switch error.httpStatus {
        case 401: return " (FCM refused our OAuth token)"
        case 403:
            return " (is the Firebase Cloud Messaging API enabled in project \(project), and does the service account"
                + " have the role Firebase Cloud Messaging API Admin, permission cloudmessaging.messages.create?)"
        case 404: return " (no Firebase project \(project)?)"
        default: return ""
        }
    }

    // MARK: APNs

    /// The device token of the APNs check: 32 zero bytes, which no device has.
    static let apnsPlaceholderToken = String(repeating: "0", count: 64)

    private func checkAPNs(_ settings: APNsSettings, http: HTTPClient) async -> Finding {
        let key: ECPrivateKey
        do {
            key = try settings.key()
        } catch {
            return Finding(subject: "apns", status: .failed, message: error.description)
        }
        let apns = configuration.apns
        let client = APNsClient(
            http: http, providerToken: APNsProviderToken(teamID: settings.teamId, keyID: settings.keyId, key: key, clock: { WallClock.now() }),
            bundleID: settings.bundleId, environment: APNsClient.Environment(rawValue: settings.environment) ?? .production,
            configuration: APNsConfiguration(
                baseURL: apns.baseURL, developmentBaseURL: apns.developmentBaseURL, caFile: apns.caFile.isEmpty ? nil : apns.caFile,
                requestTimeout: .milliseconds(apns.requestTimeoutMs)),
            logger: logger)
        let who = "team \(settings.teamId), key \(settings.keyId), topic \(settings.bundleId) (\(settings.environment))"
        switch await client.send(deviceToken: Self.apnsPlaceholderToken, data: Self.dryRunData) {
        case .sent:
            return Finding(subject: "apns", status: .ok, message: "\(who): APNs accepted a push to the placeholder device token")
        case .failed(let failure) where failure.reason == "BadDeviceToken":
            return Finding(
                subject: "apns", status: .ok,
                message: "\(who): APNs accepted the provider token and the topic (it refused only the placeholder device token: nothing was delivered)")
        case .failed(let failure):
            let hint: String
            switch failure.reason {
            case "InvalidProviderToken", "MissingProviderToken": hint = "the key file, keyId or teamId is not right"
            case "ExpiredProviderToken": hint = "check this machine's clock"
            case "BadTopic", "TopicDisallowed", "DeviceTokenNotForTopic": hint = "the bundleId is not an app of this team (or of this key)"
            case "timeout", "transport": hint = "APNs could not be reached at \(client.baseURL)"
            default: hint = "see Apple's documentation of this reason"
            }
            let status = failure.httpStatus.map { "HTTP \($0) " } ?? ""
            return Finding(subject: "apns", status: .failed, message: "\(who): APNs answered \(status)\(failure.reason): \(hint)")
        }
    }

    // MARK: Web Push

    static func checkWebPush(_ settings: WebPushSettings) -> Finding {
        let signer: VAPIDSigner
        do {
            signer = try settings.signer()
        } catch {
            return Finding(subject: "webpush", status: .failed, message: error.description)
        }
        let parts: [Substring]
        do {
            parts = try signer.token(audience: "https://push.example.invalid", expiresAt: Int64(Date().timeIntervalSince1970) + 3600)
                .split(separator: ".", omittingEmptySubsequences: false)
        } catch {
            return Finding(subject: "webpush", status: .failed, message: "the VAPID key cannot sign: \(error)")
        }
        guard parts.count == 3, let signature = Base64URL.decode(String(parts[2])),
            signer.key.publicKey.verifyES256(signature: signature, message: Array("\(parts[0]).\(parts[1])".utf8))
        else {
            return Finding(subject: "webpush", status: .failed, message: "a VAPID token signed with the key does not verify with its public half")
        }
        return Finding(
            subject: "webpush", status: .ok,
            message: "the VAPID key signs ES256 tokens that verify; applicationServerKey \(signer.publicKey), subject \(signer.subject)")
    }

    // MARK: HMS

    private func checkHMS(_ settings: AppSettings.HMSSettings, token: String?, http: HTTPClient) async -> [Finding] {
        let client: HMSClient
        do {
            let secret = try settings.secret()
            client = try HMSClient(
                credentials: HMSCredentials(appId: settings.appId, clientId: settings.clientId, clientSecret: secret),
                httpClient: http, configuration: hmsConfiguration, logger: logger)
        } catch {
            return [Finding(subject: "hms", status: .failed, message: "\(error)")]
        }
        let failure = await Self.tokenFailure(client.tokenManager).map { error in
            var detail = error.message
            if let oauth = error.oauthError { detail += " (error \(oauth)" + (error.oauthSubError.map { ", sub_error \($0)" } ?? "") + ")" }
            return (detail: detail, httpStatus: error.httpStatus)
        }
        let obtained = Self.tokenFinding(
            subject: "hms", account: "client \(settings.clientId)", tokenURL: hmsConfiguration.tokenURL, failure: failure)
        guard obtained.status == .ok else { return [obtained] }
        var findings = [obtained]
        switch await client.validate(token: token ?? Self.placeholderToken, dataJSON: Self.dryRunData) {
        case .sent:
            findings.append(
                Finding(subject: "hms", status: .ok, message: "app \(settings.appId) accepted a validate_only test message (delivered to nobody)"))
        case .failed(let error):
            var detail = [error.httpStatus.map { "HTTP \($0)" }, error.code.map { "code \($0.rawValue)" }, error.message]
                .compactMap { $0 }.joined(separator: " ")
            if let request = error.requestID { detail += " (requestId \(request))" }
            let hint = error.code?.rawValue == "80300002"
                ? " (the app may not send to these devices: check the app ID and that Push Kit is enabled for it)" : ""
            findings.append(Self.dryRunFinding(
                subject: "hms", project: "app \(settings.appId)", classification: error.classification, detail: detail,
                placeholder: token == nil, hint: hint))
        }
        return findings
    }

    // MARK: Shared

    /// Why no access token could be had, or nil when one was.
    static func tokenFailure<Failure>(_ cache: OAuthTokenCache<Failure>) async -> Failure? {
        do throws(Failure) {
            _ = try await cache.accessToken()
            return nil
        } catch {
            return error
        }
    }

    /// Whether an access token for `account` came from `tokenURL`, or why not (`failure`).
    static func tokenFinding(
        subject: String, account: String, tokenURL: String, failure: (detail: String, httpStatus: Int?)?
    ) -> Finding {
        guard let failure else {
            return Finding(subject: subject, status: .ok, message: "OAuth access token obtained for \(account) from \(tokenURL)")
        }
        return Finding(
            subject: subject, status: .failed,
            message: "no OAuth access token for \(account) from \(tokenURL): \(failure.detail)"
                + tokenHint(httpStatus: failure.httpStatus))
    }

    static func tokenHint(httpStatus: Int?) -> String {
        guard let httpStatus else {
            return " (no answer: check outbound HTTPS access to the token endpoint, or HTTPS_PROXY)"
        }
        return httpStatus == 400 || httpStatus == 401
            ? " (the credentials are refused: wrong, revoked or deleted key or secret)" : ""
    }

    /// What a refused dry run says about our credentials.
    static func dryRunFinding(
        subject: String, project: String, classification: ProviderClassification, detail: String, placeholder: Bool,
        hint: String
    ) -> Finding {
        switch classification {
        case .tokenDead:
            return placeholder
                ? Finding(
                    subject: subject, status: .ok,
                    message: "\(project) accepted our credentials and refused the placeholder device token, as expected (\(detail))")
                : Finding(
                    subject: subject, status: .failed,
                    message: "\(project) accepted our credentials but says the device token is invalid or unregistered (\(detail))")
        case .ourFault, .rejected:
            return Finding(
                subject: subject, status: .failed,
                message: "\(project) refused our request or credentials: \(detail)\(hint)")
        case .retryable:
            return Finding(
                subject: subject, status: .failed,
                message: "inconclusive: \(project) or the way to it failed (\(detail)); try again, and check outbound access")
        }
    }
}
