import PushCore

/// A subscription whose end its app's backend hears of through the app's event hook (docs/DELIVERY.md, "The
/// app's event hook"). The machine returns it when the subscription's tombstone is stored, so each end is reported
/// once, by the replica that owns the partition and wrote it: a revoke delivered (or discarded at its deadline), or
/// a dead token.
public struct EndedSubscription: Sendable, Equatable {
    public enum Cause: Sendable, Equatable {
        /// Revoked for `reason` (`expired` among them), its revoke message delivered or discarded.
        case revoked(RevocationReason)
        /// The provider said the push token is dead. `revoking`: the subscription was already revoked for that
        /// reason, and its revoke message was the one refused.
        case tokenDead(ProviderAnswer, revoking: RevocationReason?)
    }

    public var app: String
    public var subscription: Subscription
    public var cause: Cause

    public init(app: String, subscription: Subscription, cause: Cause) {
        self.app = app
        self.subscription = subscription
        self.cause = cause
    }
}

/// What a provider answered when it said a token is dead, as far as it said it (never a credential).
public struct ProviderAnswer: Sendable, Equatable {
    /// `fcm`, `hms`, `webhook`.
    public var provider: String
    /// The HTTP status of the answer, when there was one.
    public var httpStatus: Int?
    /// The provider's error code as the gateway labels it (`UNREGISTERED`, `hms_80300007`, `http_410`).
    public var code: String
    /// The provider's human-readable text, when it gave one.
    public var message: String?

    public init(provider: String, httpStatus: Int? = nil, code: String, message: String? = nil) {
        self.provider = provider
        self.httpStatus = httpStatus
        self.code = code
        self.message = message
    }
}
