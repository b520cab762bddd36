import Synchronization

/// What `/readyz` reports: ready once the consumer group has given this replica its partitions (possibly
/// none, when the group has more members than partitions) and every one of them is loaded, while Kafka can be
/// reached and the producer is usable (``KafkaHealth``).
public final class Health: Sendable {
    /// What this replica owns and has loaded (``PartitionOwnership``: the change consumer keeps it).
    let ownership: PartitionOwnership
    private let kafka: KafkaHealth?
    /// Partitions that do not fit the byte budget (``StateStore/partitionsOverBudget``).
    private let overBudget: @Sendable () -> [Int32]

    init(
        ownership: PartitionOwnership = PartitionOwnership(), kafka: KafkaHealth? = nil,
        overBudget: @escaping @Sendable () -> [Int32] = { [] }
    ) {
        self.ownership = ownership
        self.kafka = kafka
        self.overBudget = overBudget
    }

    /// A record was read from Kafka: it can be reached.
    func kafkaReachable() { kafka?.reachable() }

    /// Change partitions owned here, and the loaded ones among them.
    var partitions: (owned: Set<Int32>, ready: Set<Int32>) {
        let snapshot = ownership.snapshot
        return (snapshot.owned, snapshot.ready)
    }

    public var notReadyReason: String? {
        if let reason = kafka?.notWritableReason { return reason }
        let snapshot = ownership.snapshot
        guard snapshot.assignedOnce else { return "waiting for the consumer group to assign partitions" }
        let loading = snapshot.owned.subtracting(snapshot.ready)
        guard loading.isEmpty else {
            let tooBig = overBudget().filter(loading.contains)
            if !tooBig.isEmpty {
                return "partitions \(tooBig) of the state topic do not fit this replica's memory budget (state.maxReplicaBytes, state.maxPartitionBytes)"
            }
            return "loading partitions \(loading.sorted()) of the state topic"
        }
        return nil
    }
}
