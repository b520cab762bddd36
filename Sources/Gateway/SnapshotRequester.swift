import KafkaClient
import Logging
import PushCore
import PushProto

/// Asks upstream for the current value of a node (SPEC §4): the gateway cannot seed a new `value` /
/// `childEvent` node's shadow by itself until an event at or above it arrives.
protocol SnapshotRequester: Sendable {
    func requestSnapshot(app: String, path: DataPath)
}
