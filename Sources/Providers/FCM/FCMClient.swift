import CurlHTTP
import GatewayLogging
import Logging

/// Sends data messages through the FCM HTTP v1 API for one service account (one Firebase project).
///
/// Each ``send(token:data:)`` is one `POST {baseURL}/v1/projects/{project_id}/messages:send` with a bearer
/// token from the account's ``FCMAccessTokenManager`` (``BearerTokenHTTPClient``). When FCM answers 401 about
/// the OAuth token (not `THIRD_PARTY_AUTH_ERROR`), the token is invalidated and the request repeated once with
/// a fresh one; only a second 401 is reported. Failures come back classified (``FCMError/classification``),
/// never thrown.
///
/// Logs never contain push tokens, OAuth tokens or keys in clear, only ``Redaction/fingerprint(_:)``s.
public final class FCMClient: Sendable {
    /// The Firebase project messages are sent for.
    public let projectID: String
    /// The account's token cache (shared by all sends of this client).
    public var tokenManager: FCMAccessTokenManager { endpoint.tokens }

    private let endpoint: BearerTokenHTTPClient<FCMError>
    private let logger: Logger
    /// Unix seconds: dates `apns-expiration` (a TTL is relative, APNs wants an instant).
    private let now: @Sendable () -> Double

    /// Creates a client. Throws if the account's private key cannot be loaded.
    public init(
        serviceAccount: FCMServiceAccount,
        httpClient: HTTPClient,
        configuration: FCMConfiguration = FCMConfiguration(),
        logger: Logger,
        now: @escaping @Sendable () -> Double = WallClock.now
    ) throws {
        var logger = logger
        logger[metadataKey: "fcm.project"] = "\(serviceAccount.projectID)"
        projectID = serviceAccount.projectID
        let tokenManager = try FCMAccessTokenManager(
            serviceAccount: serviceAccount, httpClient: httpClient, configuration: configuration, logger: logger,
            now: now)
        var base = configuration.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        endpoint = BearerTokenHTTPClient(
            http: httpClient, url: "\(base)/v1/projects/\(serviceAccount.projectID)/messages:send",
            timeout: configuration.requestTimeout, tokens: tokenManager, provider: "FCM", logger: logger)
        self.logger = logger
        self.now = now
    }

    /// Sends a data message with `data` (string values, in this order) to the device holding `token`.
    public func send(token: String, data: [(key: String, value: String)]) async -> FCMSendResult {
        await send(token: token, body: FCMMessageEncoder.encodeMessage(token: token, data: data))
    }

    /// Sends a data message whose `data` object is already serialised as compact JSON (`{"k":"v",...}`,
    /// string values only), e.g. the payload whose size was checked against the 4 KB limit.
    /// With `options`, the message's TTL and collapse key (``FCMMessageEncoder``); `submission` is marked when the
    /// request is handed to the HTTP client.
    public func send(
        token: String, dataJSON: some Collection<UInt8>, options: DeliveryOptions = .none, submission: RequestSubmission? = nil
    ) async -> FCMSendResult {
        await send(
            token: token,
            body: FCMMessageEncoder.encodeMessage(token: token, dataJSON: dataJSON, options: options, now: Int64(now())),
            submission: submission)
    }

    /// A dry run (`validate_only`): FCM checks our credentials, the project, the message and the device token
    /// without delivering anything (`push-gateway check-credentials`).
    public func validate(token: String, dataJSON: some Collection<UInt8>) async -> FCMSendResult {
        await send(token: token, body: FCMMessageEncoder.encodeMessage(token: token, dataJSON: dataJSON, validateOnly: true))
    }

    private func send(token pushToken: String, body: [UInt8], submission: RequestSubmission? = nil) async -> FCMSendResult {
        do {
            return .sent(try await endpoint.post(body, submission: submission, read: Self.answer))
        } catch {
            log(error, pushToken)
            return .failed(error)
        }
    }

    /// A 200 is sent; a 401 about our OAuth token (not `THIRD_PARTY_AUTH_ERROR`) is worth a fresh token.
    private static func answer(_ response: HTTPResponse) -> BearerTokenHTTPClient<FCMError>.Answer<FCMAcceptedMessage> {
        if response.status == 200 { return .sent(FCMAcceptedMessage(body: response.body)) }
        let failure = FCMResponseParser.error(from: response)
        if response.status == 401, failure.code != .thirdPartyAuthError { return .tokenRefused(failure, metadata: [:]) }
        return .failed(failure)
    }

    /// Logs a refusal by FCM or a transport failure (the token fetcher logs its own failures).
    private func log(_ failure: FCMError, _ pushToken: String) {
        guard failure.source == .fcm || failure.source == .transport else { return }
        let metadata: Logger.Metadata = [
            LoggingKeys.pushToken: "\(Redaction.fingerprint(pushToken))",
            LoggingKeys.fcmClassification: "\(failure.classification)",
            LoggingKeys.fcmErrorCode: "\(failure.code?.rawValue ?? "-")",
            LoggingKeys.httpStatus: "\(failure.httpStatus.map(String.init) ?? "-")",
            LoggingKeys.errorMessage: "\(failure.message)",
        ]
        switch failure.classification {
        case .ourFault: logger.warning("FCM send failed (our request or credentials)", metadata: metadata)
        case .retryable, .tokenDead, .rejected: logger.debug("FCM send failed", metadata: metadata)
        }
    }
}
