import GatewayLogging
import KafkaClient
import Logging
import PushCore
import PushProto

/// Publishes `SnapshotRequest{app_id, path}` (protobuf, `proto/pushgateway/v1/change_event.proto`) to
/// `kafka.snapshotRequestsTopic`, keyed by app id. Fire and forget: a lost request only delays seeding (the
/// notification says `NotLoaded` / `OnlyKeys` meanwhile), and the next subscription asks again.
struct KafkaSnapshotRequester: SnapshotRequester {
    let producer: any RecordSink
    let topic: String
    let logger: Logger

    func requestSnapshot(app: String, path: DataPath) {
        var request = Pushgateway_V1_SnapshotRequest()
        request.appID = app
        request.path = path.description
        guard let value = try? request.serializedBytes() as [UInt8] else { return }
        let record = KafkaRecord(topic: topic, key: Array(app.utf8), value: value, headers: [])
        let error = producer.produce(record) { [logger] result in
            switch result {
            case .failure(let error): logger.warning("snapshot request not published", metadata: [LoggingKeys.app: "\(app)", LoggingKeys.error: "\(error)"])
            case .success: logger.debug("snapshot requested", metadata: [LoggingKeys.app: "\(app)", LoggingKeys.sp: "\(path)"])
            }
        }
        if let error { logger.warning("snapshot request not published", metadata: [LoggingKeys.app: "\(app)", LoggingKeys.error: "\(error)"]) }
    }
}
