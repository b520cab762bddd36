import CurlHTTP
import PushCore

/// Delivers to webhook destinations: one `POST` per notification, signed (``WebhookSigner``), to an address
/// checked just before (``HostResolver``, ``IPAddress/refusal``) and pinned for the connection, so a name that
/// resolves elsewhere between the check and the connection (DNS rebinding) cannot reach a refused address.
///
/// Outcomes (docs/DELIVERY.md): 2xx sent; 410 Gone revokes the subscription (``ProviderClassification/tokenDead``);
/// 429, 5xx, timeouts, connection and name-resolution failures are retried (`Retry-After` honoured); any other
/// status (4xx, 3xx: redirects are not followed) and a refused address are the receiver's fault
/// (``ProviderClassification/rejected``): the notification is dropped and counted, nobody is revoked.
public struct WebhookClient: Sendable {
    public struct Settings: Sendable {
        public var allowPrivateDestinations: Bool
        public var caFile: String?
        public var timeout: Duration

        public init(allowPrivateDestinations: Bool = false, caFile: String? = nil, timeout: Duration = .seconds(15)) {
            self.allowPrivateDestinations = allowPrivateDestinations
            self.caFile = caFile
            self.timeout = timeout
        }
    }

    let http: HTTPClient
    let signer: WebhookSigner
    let settings: Settings
    let resolver: HostResolver
    let clock: @Sendable () -> Double

    public init(
        http: HTTPClient, signer: WebhookSigner, settings: Settings, resolver: HostResolver = HostResolver(),
        clock: @escaping @Sendable () -> Double = { WallClock.now() }
    ) {
        self.http = http
        self.signer = signer
        self.settings = settings
        self.resolver = resolver
        self.clock = clock
    }

    /// Sends `body` to `destination` as message `messageID` (the same for every attempt of one message);
    /// `submission` is marked when the request is handed to the HTTP client.
    public func send(destination: String, messageID: String, body: [UInt8], submission: RequestSubmission? = nil) async -> DeliveryOutcome {
        guard let url = try? WebhookURL(destination) else {
            return .failed(DeliveryFailure(reason: "invalid_destination", classification: .rejected))
        }
        let address: IPAddress
        switch await OutsideEndpoint.address(of: url, resolver: resolver, allowPrivate: settings.allowPrivateDestinations) {
        case .success(let checked): address = checked
        case .failure(let failure): return .failed(failure)
        }
        let timestamp = Int64(clock())
        let request = HTTPRequest(
            method: .post, url: destination,
            headers: [
                ("content-type", "application/json"),
                ("user-agent", "PushGateway-Webhook/1"),
                ("webhook-id", messageID),
                ("webhook-timestamp", String(timestamp)),
                ("webhook-signature", signer.signature(id: messageID, timestamp: timestamp, body: body)),
            ],
            body: body, timeout: settings.timeout)
        let response: HTTPResponse
        switch await OutsideEndpoint.send(request, to: address, caFile: settings.caFile, http: http, submission: submission) {
        case .success(let answer): response = answer
        case .failure(let failure): return .failed(failure)
        }
        return Self.classify(status: response.status, retryAfter: response.header("retry-after"), now: clock())
    }

    /// What an answer's status means (see the type's documentation).
    static func classify(status: Int, retryAfter: String?, now: Double) -> DeliveryOutcome {
        switch status {
        case 200...299:
            return .sent
        case 410:
            return .failed(DeliveryFailure(reason: "http_410", classification: .tokenDead, httpStatus: 410))
        case 429, 500...599:
            let wait = retryAfter.flatMap { RetryAfter.seconds(from: $0, now: now) }
            return .failed(DeliveryFailure(reason: "http_\(status)", classification: .retryable, retryAfter: wait, httpStatus: status))
        default:
            return .failed(DeliveryFailure(reason: "http_\(status)", classification: .rejected, httpStatus: status))
        }
    }
}
