/// An app's `webhook:` settings (docs/CONFIGURATION.md): what its `kind: "webhook"` subscriptions need.
/// Without them (or without a secret) the app refuses webhook subscriptions.
public struct WebhookSettings: Decodable, Sendable, Equatable {
    /// Signing secrets, `whsec_` + standard base64 of 24 to 64 bytes. Every one signs each delivery (the
    /// `webhook-signature` header lists one signature per secret): to rotate, add the new one, update the
    /// receiver, remove the old one.
    public var secrets: [String] = []
    /// Allow destinations that are loopback, private, link-local or otherwise not public (tests, an app whose
    /// backend is inside the cluster). Default false: refused at subscribe time (address literals, `localhost`)
    /// and at each delivery (every address the name resolves to).
    public var allowPrivateDestinations = false
    /// A PEM file of CA certificates to trust instead of the system store (a receiver with a private CA).
    public var caFile = ""
    /// Time allowed for one delivery request (connect, send, answer).
    public var timeoutMs = 15_000
    /// The largest request body sent; larger events are cut down as FCM's are at 4 KB (`TooBig`, `OnlyKeys`).
    public var maxBodyBytes = 64 * 1024
    /// Requests in flight to one destination host at most (a slow receiver cannot hold every sending slot).
    public var maxInFlightPerHost = 8

    public init() {}

    enum CodingKeys: String, CodingKey {
        case secrets, allowPrivateDestinations, caFile, timeoutMs, maxBodyBytes, maxInFlightPerHost
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        secrets = try c.decodeIfPresent([String].self, forKey: .secrets) ?? secrets
        allowPrivateDestinations = try c.decodeIfPresent(Bool.self, forKey: .allowPrivateDestinations) ?? allowPrivateDestinations
        caFile = try c.decodeIfPresent(String.self, forKey: .caFile) ?? caFile
        timeoutMs = try c.decodeIfPresent(Int.self, forKey: .timeoutMs) ?? timeoutMs
        maxBodyBytes = try c.decodeIfPresent(Int.self, forKey: .maxBodyBytes) ?? maxBodyBytes
        maxInFlightPerHost = try c.decodeIfPresent(Int.self, forKey: .maxInFlightPerHost) ?? maxInFlightPerHost
    }

    func validate() throws(ConfigurationError) {
        guard (100...120_000).contains(timeoutMs) else { throw ConfigurationError("webhook.timeoutMs must be between 100 and 120000") }
        guard (1024...(16 << 20)).contains(maxBodyBytes) else {
            throw ConfigurationError("webhook.maxBodyBytes must be between 1024 and 16777216")
        }
        guard (1...1000).contains(maxInFlightPerHost) else { throw ConfigurationError("webhook.maxInFlightPerHost must be between 1 and 1000") }
    }
}
