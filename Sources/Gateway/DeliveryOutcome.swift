import Foundation
import Logging
import Providers
import PushCore
import Synchronization

/// The result of handing one notification to a provider.
public enum DeliveryOutcome: Sendable, Equatable {
    case sent
    case failed(DeliveryFailure)
    /// Not sent now: held back behind the subscription's pending retries (durably queued).
    case queued
}
