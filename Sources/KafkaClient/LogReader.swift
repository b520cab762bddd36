/// Reads explicitly assigned partitions of a log: the Kafka consumer in production (``KafkaConsumer``), the
/// in-memory log in unit tests (`GatewayTesting`). `poll` blocks: call it from a dedicated thread.
public protocol LogReader: Sendable {
    func poll(timeoutMs: Int32) -> KafkaConsumer.PollResult
    func addAssignment(_ offsets: [TopicPartition: Int64]) throws
    func removeAssignment(_ partitions: [TopicPartition]) throws
    func partitionCount(topic: String, timeoutMs: Int32) throws -> Int32
    func close()
}

extension KafkaConsumer: LogReader {}
