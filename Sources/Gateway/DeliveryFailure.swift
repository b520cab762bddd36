import Foundation
import Logging
import Providers
import PushCore
import Synchronization

extension DeliveryFailure.Kind {
    /// The providers' classification (FCM and HMS share it).
    init(_ classification: ProviderClassification) {
        switch classification {
        case .retryable: self = .retryable
        case .tokenDead: self = .tokenDead
        case .ourFault: self = .ourFault
        }
    }
}

/// Why a provider refused a notification, and what to do about it (SPEC §8).
public struct DeliveryFailure: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// Temporary: retry with backoff.
        case retryable
        /// The push token is dead: revoke the subscription.
        case tokenDead
        /// Our request, configuration or credentials are wrong: never revoke; report loudly and retry later.
        case ourFault
    }

    /// A low-cardinality label (a provider error code, `transport`, ...).
    public var reason: String
    public var kind: Kind
    /// `Retry-After`, or the provider's minimum wait (60 s after FCM `QUOTA_EXCEEDED`).
    public var retryAfter: Double?
    /// The provider project's quota is exhausted: pause the whole project, not only this device.
    public var projectQuota: Bool

    public init(reason: String, kind: Kind, retryAfter: Double? = nil, projectQuota: Bool = false) {
        self.reason = reason
        self.kind = kind
        self.retryAfter = retryAfter
        self.projectQuota = projectQuota
    }
}
