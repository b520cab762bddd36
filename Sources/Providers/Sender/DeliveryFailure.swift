/// Why a provider refused a notification, and what to do about it (SPEC §8).
public struct DeliveryFailure: Error, Sendable, Equatable {
    /// A low-cardinality label (a provider error code, `transport`, ...).
    public var reason: String
    public var classification: ProviderClassification
    /// `Retry-After`, or the provider's minimum wait (60 s after FCM `QUOTA_EXCEEDED`).
    public var retryAfter: Double?
    /// The provider project's quota is exhausted: pause the whole project, not only this device.
    public var projectQuota: Bool
    /// The HTTP status of the provider's answer, when there was one.
    public var httpStatus: Int?
    /// The provider's human-readable text, when it gave one (never the token or a credential): what an app's event
    /// hook reports of a dead token.
    public var message: String?

    public init(
        reason: String, classification: ProviderClassification, retryAfter: Double? = nil, projectQuota: Bool = false,
        httpStatus: Int? = nil, message: String? = nil
    ) {
        self.reason = reason
        self.classification = classification
        self.retryAfter = retryAfter
        self.projectQuota = projectQuota
        self.httpStatus = httpStatus
        self.message = message
    }
}
