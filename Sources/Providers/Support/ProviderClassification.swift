/// What the delivery layer should do about a failed send, whatever the provider (SPEC §8). FCM and HMS each
/// map their answers to it (``FCMError/classify(source:code:httpStatus:namesToken:)``,
/// ``HMSError/classify(source:code:httpStatus:namesToken:)``); the gateway acts on it. The raw value is the
/// spelling in logs, metrics and the per-app status.
public enum ProviderClassification: String, Hashable, Sendable, CustomStringConvertible {
    /// Temporary: retry later with backoff (honouring the provider's minimum delay).
    case retryable
    /// The push token is dead: revoke the subscription.
    case tokenDead
    /// Our request, configuration or credentials are wrong: never revoke anyone; report loudly
    /// (log, metric, per-app status) and retry later.
    case ourFault
    /// The receiver refused this one message (a webhook's 4xx other than 410 and 429, a destination that
    /// resolves to a refused address): it is dropped and counted; nobody is revoked, nothing is retried.
    case rejected

    public var description: String { rawValue }
}
