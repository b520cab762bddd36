import CRdKafka
import Logging
import Synchronization

/// What a consumer learns from a rebalance.
public enum RebalanceEvent: Sendable {
    case assigned([TopicPartition])
    /// Partitions taken away. `lost` is true when they were lost (session timeout) rather than revoked.
    case revoked([TopicPartition], lost: Bool)
}

/// State shared with librdkafka's C callbacks through the client's opaque pointer. It lives as long as the
/// client that points to it (the client object holds it strongly).
final class ClientCallbacks: @unchecked Sendable {
    let logger: Logger
    /// Called on the polling thread: an assignment after librdkafka applied it (so that new partitions can be
    /// paused), a revocation before (so that their work can drain first). Set by `subscribe`.
    var onRebalance: (@Sendable (RebalanceEvent) -> Void)? {
        get { rebalanceHandler.withLock { $0 } }
        set { rebalanceHandler.withLock { $0 = newValue } }
    }
    private let rebalanceHandler = Mutex<(@Sendable (RebalanceEvent) -> Void)?>(nil)
    /// librdkafka's statistics JSON (every `statistics.interval.ms`), on the polling thread.
    let onStatistics: (@Sendable ([UInt8]) -> Void)?

    init(
        logger: Logger, onRebalance: (@Sendable (RebalanceEvent) -> Void)? = nil,
        onStatistics: (@Sendable ([UInt8]) -> Void)? = nil
    ) {
        self.logger = logger
        self.onStatistics = onStatistics
        self.onRebalance = onRebalance
    }

    static func from(_ client: OpaquePointer?) -> ClientCallbacks? {
        guard let client, let opaque = rd_kafka_opaque(client) else { return nil }
        return Unmanaged<ClientCallbacks>.fromOpaque(opaque).takeUnretainedValue()
    }

    func install(on config: KafkaConfig) {
        rd_kafka_conf_set_opaque(config.handle, Unmanaged.passUnretained(self).toOpaque())
        rd_kafka_conf_set_log_cb(config.handle, kafkaLogCallback)
        if onStatistics != nil { rd_kafka_conf_set_stats_cb(config.handle, kafkaStatisticsCallback) }
    }
}

/// Hands librdkafka's statistics JSON to the owner; returning 0 lets librdkafka free it.
private func kafkaStatisticsCallback(
    _ client: OpaquePointer?, _ json: UnsafeMutablePointer<CChar>?, _ length: Int, _ opaque: UnsafeMutableRawPointer?
) -> Int32 {
    guard let json, let callbacks = opaque.map({ Unmanaged<ClientCallbacks>.fromOpaque($0).takeUnretainedValue() }) else {
        return 0
    }
    callbacks.onStatistics?(Array(UnsafeRawBufferPointer(start: json, count: length)))
    return 0
}

/// librdkafka's log lines into swift-log, the facility as `source`.
private func kafkaLogCallback(_ client: OpaquePointer?, _ level: Int32, _ facility: UnsafePointer<CChar>?, _ text: UnsafePointer<CChar>?) {
    guard let callbacks = ClientCallbacks.from(client) else { return }
    let logLevel: Logger.Level
    switch level {
    case 0...2: logLevel = .critical
    case 3: logLevel = .error
    case 4: logLevel = .warning
    case 5: logLevel = .notice
    case 6: logLevel = .info
    default: logLevel = .debug
    }
    let message = text.map { String(cString: $0) } ?? ""
    callbacks.logger.log(
        level: logLevel, "\(message)", metadata: ["kafka.facility": .string(facility.map { String(cString: $0) } ?? "")],
        source: "librdkafka")
}

extension [TopicPartition] {
    init(list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?) {
        self.init()
        guard let list, let elements = list.pointee.elems else { return }
        for index in 0..<Int(list.pointee.cnt) {
            let element = elements[index]
            append(TopicPartition(topic: String(cString: element.topic), partition: element.partition))
        }
    }
}
