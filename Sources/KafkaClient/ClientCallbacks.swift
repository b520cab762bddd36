import CRdKafka
import GatewayLogging
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
    /// Errors outside of records, fatal ones included, on the polling thread.
    let onEvent: (@Sendable (ClientEvent) -> Void)?
    /// librdkafka's log lines and errors, limited per facility (an outage repeats the same line every second).
    let limiter = LogLimiter()
    /// Companion topics (subscribed topic → companion): partition p of the companion is assigned and revoked with
    /// partition p of the subscribed topic (``KafkaConsumer/init(properties:logger:companions:onRebalance:onStatistics:onEvent:)``).
    var companions: [String: String] = [:]

    init(
        logger: Logger, onRebalance: (@Sendable (RebalanceEvent) -> Void)? = nil,
        onStatistics: (@Sendable ([UInt8]) -> Void)? = nil, onEvent: (@Sendable (ClientEvent) -> Void)? = nil
    ) {
        self.logger = logger
        self.onStatistics = onStatistics
        self.onEvent = onEvent
        self.onRebalance = onRebalance
    }

    static func from(_ client: OpaquePointer?) -> ClientCallbacks? {
        guard let client, let opaque = rd_kafka_opaque(client) else { return nil }
        return Unmanaged<ClientCallbacks>.fromOpaque(opaque).takeUnretainedValue()
    }

    func install(on config: KafkaConfig) {
        rd_kafka_conf_set_opaque(config.handle, Unmanaged.passUnretained(self).toOpaque())
        rd_kafka_conf_set_log_cb(config.handle, kafkaLogCallback)
        rd_kafka_conf_set_error_cb(config.handle, kafkaErrorCallback)
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

/// Errors outside of records: fatal ones (the original error read with `rd_kafka_fatal_error`), every broker
/// down, others. Logged (limited per kind) and handed to the owner.
private func kafkaErrorCallback(_ client: OpaquePointer?, _ code: Int32, _ reason: UnsafePointer<CChar>?, _ opaque: UnsafeMutableRawPointer?) {
    guard let callbacks = opaque.map({ Unmanaged<ClientCallbacks>.fromOpaque($0).takeUnretainedValue() }) else { return }
    let text = reason.map { String(cString: $0) } ?? ""
    let event: ClientEvent
    if code == RD_KAFKA_RESP_ERR__FATAL.rawValue, let client {
        var buffer = [CChar](repeating: 0, count: 512)
        let original = rd_kafka_fatal_error(client, &buffer, buffer.count)
        let message = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        event = .fatal(KafkaError(code: original.rawValue, message: message.isEmpty ? text : message))
    } else if code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN.rawValue {
        event = .allBrokersDown
    } else {
        event = .error(KafkaError(code: code, message: text))
    }
    // Connection failures are already in librdkafka's own (limited) log lines, and "all brokers down" is
    // reported once by the owner: logging them here too would double every line of an outage.
    let quiet = code == RD_KAFKA_RESP_ERR__TRANSPORT.rawValue || code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN.rawValue
    if case .fatal = event {
        callbacks.logger.error("librdkafka fatal error: the client must be replaced", metadata: [LoggingKeys.error: "\(event)"])
    } else if !quiet, case .log(let suppressed) = callbacks.limiter.decide(facility: "error:\(code)") {
        var metadata: Logger.Metadata = ["error": "\(text)", "kafka.error.code": "\(code)"]
        if suppressed > 0 { metadata[LoggingKeys.suppressed] = "\(suppressed)" }
        callbacks.logger.warning("librdkafka error", metadata: metadata, source: "librdkafka")
    }
    callbacks.onEvent?(event)
}

/// librdkafka's log lines into swift-log, the facility as `source`, at most one line per facility and
/// interval (with the count of the lines held back).
private func kafkaLogCallback(_ client: OpaquePointer?, _ level: Int32, _ facility: UnsafePointer<CChar>?, _ text: UnsafePointer<CChar>?) {
    guard let callbacks = ClientCallbacks.from(client) else { return }
    let facilityName = facility.map { String(cString: $0) } ?? ""
    // Debug lines come only when the `debug` property asks for them (a diagnosis): every one is kept.
    if level >= 7 {
        let message = text.map { String(cString: $0) } ?? ""
        callbacks.logger.debug("\(message)", metadata: [LoggingKeys.kafkaFacility: .string(facilityName)], source: "librdkafka")
        return
    }
    guard case .log(let suppressed) = callbacks.limiter.decide(facility: "log:\(facilityName)") else { return }
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
    var metadata: Logger.Metadata = ["kafka.facility": .string(facilityName)]
    if suppressed > 0 { metadata[LoggingKeys.suppressed] = "\(suppressed)" }
    callbacks.logger.log(level: logLevel, "\(message)", metadata: metadata, source: "librdkafka")
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
