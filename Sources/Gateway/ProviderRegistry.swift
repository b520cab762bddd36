import CurlHTTP
import Logging
import Providers
import PushCore

/// The sender of each (app, kind): FCM with the app's service account, or the console sink when the app has
/// no credentials.
public final class ProviderRegistry: Sendable {
    private let senders: [String: [SubscriberKind: any PushSender]]
    let httpClient: HTTPClient?

    public init(configuration: GatewayConfiguration, logger: Logger) throws {
        var senders: [String: [SubscriberKind: any PushSender]] = [:]
        let needsHTTP = configuration.apps.values.contains { !$0.fcmServiceAccountFile.isEmpty }
        var client: HTTPClient?
        if needsHTTP {
            client = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    maxConnectionsPerHost: configuration.fcm.maxConnections,
                    caFile: configuration.fcm.caFile.isEmpty ? nil : configuration.fcm.caFile),
                logger: logger)
        }
        let fcmConfiguration = FCMConfiguration(
            baseURL: configuration.fcm.baseURL,
            tokenURL: configuration.fcm.tokenURL.isEmpty ? nil : configuration.fcm.tokenURL,
            requestTimeout: .milliseconds(configuration.fcm.requestTimeoutMs))
        for (app, settings) in configuration.apps {
            if let client, !settings.fcmServiceAccountFile.isEmpty {
                let account: FCMServiceAccount
                do {
                    account = try FCMServiceAccount(contentsOfFile: settings.fcmServiceAccountFile)
                } catch {
                    throw ConfigurationError("apps.\(app).fcmServiceAccountFile: \(error)")
                }
                let fcm = try FCMClient(serviceAccount: account, httpClient: client, configuration: fcmConfiguration, logger: logger)
                senders[app] = [.mobile: FCMSender(client: fcm)]
            } else {
                senders[app] = [.mobile: ConsoleSink(app: app)]
            }
        }
        self.senders = senders
        self.httpClient = client
    }

    func sender(app: String, kind: SubscriberKind) -> (any PushSender)? { senders[app]?[kind] }

    func usesConsole(app: String) -> Bool { senders[app]?[.mobile] is ConsoleSink }

    func shutdown() async { await httpClient?.shutdown() }
}
