import CurlHTTP
import Logging
import SSLCrypto

/// Where APNs is and how long a request may take (the gateway's `apns:` configuration).
public struct APNsConfiguration: Sendable {
    public var baseURL: String
    public var developmentBaseURL: String
    /// A PEM file of CA certificates to trust instead of the client's (tests with a fake APNs); nil: the client's.
    public var caFile: String?
    public var requestTimeout: Duration

    public init(
        baseURL: String = APNsMessage.productionBaseURL, developmentBaseURL: String = APNsMessage.developmentBaseURL,
        caFile: String? = nil, requestTimeout: Duration = .seconds(10)
    ) {
        self.baseURL = baseURL
        self.developmentBaseURL = developmentBaseURL
        self.caFile = caFile
        self.requestTimeout = requestTimeout
    }
}

/// Sends background pushes to one app's Apple devices through APNs directly, with token-based authentication: the
/// team's provider token (``APNsProviderToken``), the app's bundle id as topic, HTTP/2 to production or to the
/// development host (``APNsMessage``).
///
/// A refused provider token (`ExpiredProviderToken`, `InvalidProviderToken`) is dropped when it is old enough for
/// Apple to accept a new one, so the retry signs a new one; either way the failure is ours: nobody is revoked, the
/// notification is retried, and the refusal is logged.
public struct APNsClient: Sendable {
    public enum Environment: String, Sendable {
        case production
        case development
    }

    let http: HTTPClient
    public let providerToken: APNsProviderToken
    public let bundleID: String
    public let baseURL: String
    let configuration: APNsConfiguration
    let clock: @Sendable () -> Double
    let logger: Logger

    public init(
        http: HTTPClient, providerToken: APNsProviderToken, bundleID: String, environment: Environment, configuration: APNsConfiguration,
        logger: Logger, clock: @escaping @Sendable () -> Double = { WallClock.now() }
    ) {
        self.http = http
        self.providerToken = providerToken
        self.bundleID = bundleID
        self.baseURL = environment == .production ? configuration.baseURL : configuration.developmentBaseURL
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
    }

    /// Sends `data` (the data document) to the device `deviceToken` (hex) with `options` (a user notification's TTL:
    /// `apns-expiration`; its collapse key: `apns-collapse-id`).
    public func send(
        deviceToken: String, data: [UInt8], options: DeliveryOptions = .none, submission: RequestSubmission? = nil
    ) async -> DeliveryOutcome {
        guard APNsMessage.isValidDeviceToken(deviceToken) else {
            return .failed(DeliveryFailure(reason: "invalid_device_token", classification: .rejected))
        }
        let jwt: String
        do {
            jwt = try providerToken.token()
        } catch {
            return .failed(DeliveryFailure(reason: "provider_token", classification: .ourFault, message: "\(error)"))
        }
        let expiration = options.ttlSeconds.map { ttl in ttl <= 0 ? Int64(0) : Int64(clock()) + Int64(ttl) }
        var request: HTTPRequest
        do {
            request = try APNsMessage.request(
                data: data, token: deviceToken, bundleID: bundleID, providerToken: jwt, baseURL: baseURL, expiration: expiration,
                collapseKey: options.collapseKey, timeout: configuration.requestTimeout)
        } catch {
            // The document is within 4057 bytes (the payload builder's limit for APNs).
            return .failed(DeliveryFailure(reason: "too_big", classification: .rejected))
        }
        if let caFile = configuration.caFile { request.caFile = caFile }
        let response: HTTPResponse
        switch await http.deliveryAnswer(to: request, submission: submission) {
        case .success(let answer): response = answer
        case .failure(let failure): return .failed(failure)
        }
        let (outcome, tokenRefused) = APNsMessage.outcome(
            status: response.status, body: response.body, retryAfter: response.header("retry-after"), now: clock())
        if tokenRefused {
            let renewed = providerToken.refused(jwt)
            logger.error(
                "APNs refused the provider token",
                metadata: [
                    "team": "\(providerToken.teamID)", "key": "\(providerToken.keyID)",
                    "renewed": "\(renewed ? "yes: the retry signs a new one" : "no: it is under 20 minutes old (Apple's limit); check the key, team and clock")",
                ])
        }
        return outcome
    }
}
