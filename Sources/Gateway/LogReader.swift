import KafkaClient

/// Reads explicitly assigned partitions of a log: the Kafka consumer in production (``KafkaConsumer``), the
/// ``InMemoryLog`` in unit tests. `poll` blocks: call it from a dedicated thread.
protocol LogReader: Sendable {
    func poll(timeoutMs: Int32) -> KafkaConsumer.PollResult
    func addAssignment(_ offsets: [TopicPartition: Int64]) throws
    func removeAssignment(_ partitions: [TopicPartition]) throws
    func partitionCount(topic: String, timeoutMs: Int32) throws -> Int32
    func close()
}

extension KafkaConsumer: LogReader {}
