import PushCore

/// An app's `eventHook:` settings (docs/CONFIGURATION.md): one HTTPS URL that receives, signed with the app's
/// `webhook.secrets`, what happened to its subscriptions (revoked, expired, dead token; docs/PAYLOADS.md, "Event
/// hook"). The destination rules, the timeout and the CA file are the app's `webhook:` ones.
public struct EventHookSettings: Decodable, Sendable, Equatable {
    /// `https://host[:port][/path][?query]`, checked like a webhook subscription's `destination`.
    public var url = ""
    /// Events queued for the hook at most, per app; beyond it new events are dropped and counted
    /// (`pushgateway_event_hook_dropped_total{reason="queue_full"}`).
    public var maxQueuedEvents = 10_000

    public init() {}

    enum CodingKeys: String, CodingKey { case url, maxQueuedEvents }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        url = try c.decodeIfPresent(String.self, forKey: .url) ?? url
        maxQueuedEvents = try c.decodeIfPresent(Int.self, forKey: .maxQueuedEvents) ?? maxQueuedEvents
    }

    /// Checked at settings load: an https URL, a public destination unless `webhook.allowPrivateDestinations`,
    /// and secrets to sign with.
    func validate(webhook: WebhookSettings?) throws(ConfigurationError) {
        let parsed: WebhookURL
        do {
            parsed = try WebhookURL(url)
        } catch {
            throw ConfigurationError("eventHook.url \(error.description)")
        }
        guard let webhook, !webhook.secrets.isEmpty else {
            throw ConfigurationError("eventHook needs webhook.secrets: its events are signed with them")
        }
        if !webhook.allowPrivateDestinations, let refusal = parsed.refusal {
            throw ConfigurationError("eventHook.url is refused: \(refusal) (set webhook.allowPrivateDestinations to allow it)")
        }
        guard (1...1_000_000).contains(maxQueuedEvents) else {
            throw ConfigurationError("eventHook.maxQueuedEvents must be between 1 and 1000000")
        }
    }
}
