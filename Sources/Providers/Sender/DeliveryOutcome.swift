/// The result of handing one notification to a provider (``PushSender``).
public enum DeliveryOutcome: Sendable, Equatable {
    case sent
    case failed(DeliveryFailure)
}
