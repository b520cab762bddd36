/// Why a provider refused a notification, and what to do about it (SPEC §8).
public struct DeliveryFailure: Sendable, Equatable {
    /// A low-cardinality label (a provider error code, `transport`, ...).
    public var reason: String
    public var classification: ProviderClassification
    /// `Retry-After`, or the provider's minimum wait (60 s after FCM `QUOTA_EXCEEDED`).
    public var retryAfter: Double?
    /// The provider project's quota is exhausted: pause the whole project, not only this device.
    public var projectQuota: Bool

    public init(reason: String, classification: ProviderClassification, retryAfter: Double? = nil, projectQuota: Bool = false) {
        self.reason = reason
        self.classification = classification
        self.retryAfter = retryAfter
        self.projectQuota = projectQuota
    }
}
