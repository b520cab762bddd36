/// Where the gateway's records go: the Kafka producer in production (the gateway's `KafkaWriter`), an in-memory
/// log in unit tests (`GatewayTesting`'s `InMemoryLog`).
public protocol RecordSink: Sendable {
    /// Queues `record` without blocking. Returns the error when it could not even be queued (then `completion`
    /// is never called); otherwise `completion` runs later with where the record was written, never inside this
    /// call, so a caller may hold a lock while producing (that is how per-partition write order is kept).
    func produce(
        _ record: KafkaRecord, completion: @escaping @Sendable (Result<(partition: Int32, offset: Int64), KafkaError>) -> Void
    ) -> KafkaError?
    /// False once the sink takes no more records (it is closing): writes retried until stored end then.
    var isOpen: Bool { get }
    /// The timer service its writes are retried on (``produceUntilStored(_:delay:maxDelay:while:failed:done:)``, the
    /// partitions' repairs and gap reads): the gateway's one ``Timers``, stopped just before the sink closes. A
    /// retry pending then ends at once, as on a closed sink.
    var timers: Timers { get }
}

extension RecordSink {
    public var isOpen: Bool { true }

    /// Produces `record` until it is stored: after a failure, again `delay` seconds later (doubling up to
    /// `maxDelay`, on ``timers``), while `keepTrying()` holds and the sink and its timers run (a shutdown ends the
    /// chain at once, even in the middle of a wait). `failed` hears each failure with the delay before the next
    /// attempt; `done` runs once, with the record's offset once it is acknowledged, or nil when the chain ended
    /// without storing it. The one chain for records written outside a partition's state machine (dead letters,
    /// load markers); the machine's own writes retry on its timers, the same service.
    public func produceUntilStored(
        _ record: KafkaRecord, delay: Double = 1, maxDelay: Double = 30, while keepTrying: @escaping @Sendable () -> Bool,
        failed: @escaping @Sendable (KafkaError, Double) -> Void, done: @escaping @Sendable (Int64?) -> Void
    ) {
        let retry: @Sendable (KafkaError) -> Void = { [self] error in
            guard isOpen, timers.isRunning, keepTrying() else { return done(nil) }
            failed(error, delay)
            timers.schedule(after: delay) { firing in
                guard firing == .due, isOpen, keepTrying() else { return done(nil) }
                produceUntilStored(
                    record, delay: min(delay * 2, maxDelay), maxDelay: maxDelay, while: keepTrying, failed: failed, done: done)
            }
        }
        if let error = produce(record, completion: { result in
            switch result {
            case .success(let written): done(written.offset)
            case .failure(let error): retry(error)
            }
        }) {
            retry(error)
        }
    }

    /// Produces `records` and waits for every acknowledgement: one round trip for N records. Returns where
    /// each was written, in order, or throws the first error.
    public func write(_ records: [KafkaRecord]) async throws(KafkaError) -> [(partition: Int32, offset: Int64)] {
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
