import CurlHTTP
import GatewayLogging
import Logging

/// Sends data messages through the Huawei Push Kit server API v1 for one app.
///
/// Each ``send(token:dataJSON:)`` is one `POST {baseURL}/v1/{appId}/messages:send` with a bearer token from
/// the app's ``HMSAccessTokenManager`` (OAuth 2.0 client credentials; ``BearerTokenHTTPClient``). HMS answers
/// `{"code":"…","msg":"…","requestId":"…"}`, often with HTTP 200 even for failures, so the result code
/// decides (table on ``HMSError``). When HMS refuses the OAuth token (`80200001`, `80200003`, or HTTP 401),
/// the token is invalidated and the request repeated once with a fresh one; only a second refusal is reported
/// (as `.ourFault`). Failures come back classified (``HMSError/classification``), never thrown.
///
/// Logs never contain push tokens, OAuth tokens or the client secret in clear, only
/// ``Redaction/fingerprint(_:)``s.
public final class HMSClient: Sendable {
    /// Why a client could not be created.
    public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// The app messages are sent for.
    public let appId: String
    /// The app's token cache (shared by all sends of this client).
    public var tokenManager: HMSAccessTokenManager { endpoint.tokens }

    private let endpoint: BearerTokenHTTPClient<HMSError>
    private let logger: Logger

    /// Creates a client. Throws ``ConfigurationError`` for empty credentials, an app ID that cannot be put in
    /// a URL path, or a base or token URL that is not `http(s)://`.
    public init(
        credentials: HMSCredentials,
        httpClient: HTTPClient,
        configuration: HMSConfiguration = HMSConfiguration(),
        logger: Logger,
        now: @escaping @Sendable () -> Double = WallClock.now
    ) throws {
        try Self.validate(credentials, configuration)
        var logger = logger
        logger[metadataKey: "hms.app_id"] = "\(credentials.appId)"
        appId = credentials.appId
        let tokenManager = HMSAccessTokenManager(
            credentials: credentials, httpClient: httpClient, configuration: configuration, logger: logger, now: now)
        var base = configuration.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        endpoint = BearerTokenHTTPClient(
            http: httpClient, url: "\(base)/v1/\(credentials.appId)/messages:send",
            timeout: configuration.requestTimeout, tokens: tokenManager, provider: "HMS", logger: logger)
        self.logger = logger
    }

    private static func validate(_ credentials: HMSCredentials, _ configuration: HMSConfiguration) throws {
        let pathSafe = credentials.appId.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
                true
            default:
                false
            }
        }
        guard !credentials.appId.isEmpty, pathSafe else {
            throw ConfigurationError(description: "HMS appId must be non-empty letters, digits, '-', '.' or '_'")
        }
        guard !credentials.clientId.isEmpty, !credentials.clientSecret.isEmpty else {
            throw ConfigurationError(description: "HMS clientId and clientSecret must not be empty")
        }
        for (name, url) in [("baseURL", configuration.baseURL), ("tokenURL", configuration.tokenURL)] {
            guard url.hasPrefix("https://") || url.hasPrefix("http://") else {
                throw ConfigurationError(description: "HMS \(name) must be an http:// or https:// URL")
            }
        }
    }

    /// Sends a data message whose data object is already serialised as compact JSON (`{"k":"v",...}`, string
    /// values only), e.g. the payload whose size was checked; HMS gets it as the string value of `data`.
    /// With `options`, the message's TTL and collapse key (``HMSMessageEncoder``); `submission` is marked when the
    /// request is handed to the HTTP client.
    public func send(
        token: String, dataJSON: some Collection<UInt8>, options: DeliveryOptions = .none, submission: RequestSubmission? = nil
    ) async -> HMSSendResult {
        await send(
            token: token, body: HMSMessageEncoder.encodeMessage(token: token, dataJSON: dataJSON, options: options), submission: submission)
    }

    /// Sends a data message with `data` (string values, in this order) to the device holding `token`.
    public func send(token: String, data: [(key: String, value: String)]) async -> HMSSendResult {
        await send(token: token, body: HMSMessageEncoder.encodeMessage(token: token, data: data))
    }

    /// A dry run (`validate_only: true`, a test message): HMS checks our credentials, the app, the message and
    /// the device token without delivering anything (`push-gateway check-credentials`).
    public func validate(token: String, dataJSON: some Collection<UInt8>) async -> HMSSendResult {
        await send(token: token, body: HMSMessageEncoder.encodeMessage(token: token, dataJSON: dataJSON, validateOnly: true))
    }

    private func send(token pushToken: String, body: [UInt8], submission: RequestSubmission? = nil) async -> HMSSendResult {
        do {
            return .sent(requestID: try await endpoint.post(body, submission: submission) { response in Self.answer(response, pushToken) })
        } catch {
            log(error, pushToken)
            return .failed(error)
        }
    }

    /// A success is sent; `80200001`, `80200003` or HTTP 401 (our OAuth token refused) are worth a fresh token.
    private static func answer(_ response: HTTPResponse, _ pushToken: String) -> BearerTokenHTTPClient<HMSError>.Answer<String> {
        switch HMSResponseParser.outcome(of: response, pushToken: pushToken) {
        case .sent(let requestID):
            return .sent(requestID)
        case .failed(let failure) where (failure.code?.isOAuthTokenRefusal ?? false) || response.status == 401:
            return .tokenRefused(failure, metadata: [
                LoggingKeys.hmsCode: "\(failure.code?.rawValue ?? "-")", LoggingKeys.httpStatus: "\(response.status)",
            ])
        case .failed(let failure):
            return .failed(failure)
        }
    }

    /// Logs a refusal by HMS or a transport failure (the token fetcher logs its own failures).
    private func log(_ failure: HMSError, _ pushToken: String) {
        guard failure.source == .hms || failure.source == .transport else { return }
        let metadata: Logger.Metadata = [
            LoggingKeys.pushToken: "\(Redaction.fingerprint(pushToken))",
            LoggingKeys.hmsClassification: "\(failure.classification)",
            LoggingKeys.hmsCode: "\(failure.code?.rawValue ?? "-")",
            LoggingKeys.hmsRequestId: "\(failure.requestID ?? "-")",
            LoggingKeys.httpStatus: "\(failure.httpStatus.map(String.init) ?? "-")",
            LoggingKeys.errorMessage: "\(failure.message)",
        ]
        switch (failure.classification, failure.code) {
        case (.ourFault, _):
            logger.warning("HMS send failed (our request or credentials)", metadata: metadata)
        case (.retryable, .unknown?), (.retryable, .success?):
            logger.warning("HMS answered an unknown result code; will retry", metadata: metadata)
        case (.retryable, _), (.tokenDead, _), (.rejected, _):
            logger.debug("HMS send failed", metadata: metadata)
        }
    }
}
