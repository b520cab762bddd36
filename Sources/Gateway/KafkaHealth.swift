import GatewayLogging
import KafkaClient
import Logging
import Synchronization

/// What this replica knows of its link to Kafka: whether the brokers can be reached, and whether its producer
/// is usable. `/readyz` is 503 while either is not the case (Kubernetes stops routing calls here, but must not
/// restart the pod: that is liveness's business, which stays 200). API writes fail fast with 503 meanwhile.
/// An outage is logged once when it starts and once when it ends ("recovered after N s").
final class KafkaHealth: Sendable {
    private struct State {
        var downSince: ContinuousClock.Instant?
        var replacingProducer = false
    }

    private let state = Mutex(State())
    /// Fast path for ``reachable()``, called on every acknowledgement.
    private let down = Atomic<Bool>(false)
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    /// No broker can be reached (a client said so).
    func brokersDown(client: String) {
        let first = state.withLock { state -> Bool in
            guard state.downSince == nil else { return false }
            state.downSince = .now
            return true
        }
        down.store(true, ordering: .releasing)
        if first {
            logger.error("Kafka cannot be reached: API writes answer 503 and /readyz is 503 until it can", metadata: [LoggingKeys.kafkaClient: "\(client)"])
        }
    }

    /// Something reached a broker (an acknowledgement, a record read).
    func reachable() {
        guard down.load(ordering: .acquiring) else { return }
        let since = state.withLock { state -> ContinuousClock.Instant? in
            defer { state.downSince = nil }
            return state.downSince
        }
        down.store(false, ordering: .releasing)
        if let since { logger.notice("Kafka reachable again", metadata: [LoggingKeys.outage: "\(ContinuousClock.now - since)"]) }
    }

    /// No client has said that the brokers are down since something last reached them.
    var isReachable: Bool { !down.load(ordering: .acquiring) }

    func producerReplacing(_ replacing: Bool) { state.withLock { $0.replacingProducer = replacing } }

    /// Nil while writes can go through; else why not.
    var notWritableReason: String? {
        state.withLock { state in
            if state.replacingProducer { return "the Kafka producer is being replaced after a fatal error" }
            if let since = state.downSince { return "Kafka has not been reachable for \(ContinuousClock.now - since)" }
            return nil
        }
    }
}
