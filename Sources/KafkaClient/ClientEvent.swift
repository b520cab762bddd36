/// What a librdkafka client reports outside of records: a fatal error (the client is unusable and must be
/// replaced), every broker down, or another error (librdkafka retries those itself).
public enum ClientEvent: Sendable, Equatable {
    /// `rd_kafka_fatal_error`: the underlying error; the client cannot be used any more.
    case fatal(KafkaError)
    /// No broker can be reached (`ALL_BROKERS_DOWN`).
    case allBrokersDown
    case error(KafkaError)
}

extension KafkaError: Equatable {
    public static func == (left: KafkaError, right: KafkaError) -> Bool { left.code == right.code && left.message == right.message }
}
