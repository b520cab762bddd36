import KafkaClient

/// Where the gateway's records go: the Kafka producer in production (``KafkaWriter``), an in-memory log in
/// unit tests.
protocol RecordSink: Sendable {
    /// Queues `record` without blocking. Returns the error when it could not even be queued (then `completion`
    /// is never called); otherwise `completion` runs later with where the record was written, never inside this
    /// call, so a caller may hold a lock while producing (that is how per-partition write order is kept).
    func produce(
        _ record: KafkaRecord, completion: @escaping @Sendable (Result<(partition: Int32, offset: Int64), KafkaError>) -> Void
    ) -> KafkaError?
}

extension RecordSink {
    /// Produces `records` and waits for every acknowledgement: one round trip for N records. Returns where
    /// each was written, in order, or throws the first error.
    func write(_ records: [KafkaRecord]) async throws(KafkaError) -> [(partition: Int32, offset: Int64)] {
        guard !records.isEmpty else { return [] }
        let collector = WriteCollector(count: records.count)
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<[(partition: Int32, offset: Int64)], KafkaError>, Never>) in
            collector.install(continuation)
            for (index, record) in records.enumerated() {
                if let error = produce(record, completion: { collector.record(index, $0) }) {
                    collector.record(index, .failure(error))
                }
            }
        }
        return try result.get()
    }
}
