import CRdKafka
import GatewayLogging
import Logging

/// A consumer-group member over librdkafka's high-level consumer.
///
/// Offsets: auto-commit is on but automatic offset *storing* is off; the owner calls ``storeOffsets(_:)``
/// with the position after the last record whose work is finished, so a committed offset never passes
/// unfinished work (at-least-once). librdkafka commits stored offsets periodically, on revoke and on close.
///
/// ``poll(timeoutMs:)`` blocks: call it from a dedicated thread, never from the cooperative pool.
public final class KafkaConsumer: @unchecked Sendable {
    private let client: OpaquePointer
    private let callbacks: ClientCallbacks
    private let logger: Logger
    private var closed = false

    /// A group member when `properties` has a `group.id` and ``subscribe(topics:)`` is called; a reader of
    /// explicitly assigned partitions with ``assign(_:)``.
    ///
    /// `companions` (subscribed topic → companion topic, not subscribed): whenever the group assigns or revokes
    /// partition p of a subscribed topic, partition p of its companion is assigned or revoked with it, in the same
    /// librdkafka call (the rebalance listener hears of the group's partitions only). The companion must have at
    /// least the subscribed topic's partition count. Its offsets are stored and committed like the others', in the
    /// member's name.
    public init(
        properties: [String: String], logger: Logger, companions: [String: String] = [:],
        onRebalance: (@Sendable (RebalanceEvent) -> Void)? = nil,
        onStatistics: (@Sendable ([UInt8]) -> Void)? = nil, onEvent: (@Sendable (ClientEvent) -> Void)? = nil
    ) throws {
        var merged = [
            "enable.auto.commit": "true",
            "enable.auto.offset.store": "false",
            "auto.commit.interval.ms": "1000",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": "false",
        ]
        for (key, value) in properties { merged[key] = value }
        let config = try KafkaConfig(merged)
        let callbacks = ClientCallbacks(logger: logger, onRebalance: onRebalance, onStatistics: onStatistics, onEvent: onEvent)
        callbacks.companions = companions
        callbacks.install(on: config)
        rd_kafka_conf_set_rebalance_cb(config.handle, kafkaRebalanceCallback)
        self.client = try makeClient(type: RD_KAFKA_CONSUMER, config: config)
        self.callbacks = callbacks
        self.logger = logger
        rd_kafka_poll_set_consumer(client)
    }

    /// Joins the group for `topics`; `onRebalance` hears of every assignment and revocation (on the polling
    /// thread, inside ``poll(timeoutMs:)``).
    public func subscribe(topics: [String], onRebalance: (@Sendable (RebalanceEvent) -> Void)? = nil) throws {
        if let onRebalance { callbacks.onRebalance = onRebalance }
        guard let list = rd_kafka_topic_partition_list_new(Int32(topics.count)) else {
            throw KafkaError(message: "cannot allocate a partition list")
        }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for topic in topics { rd_kafka_topic_partition_list_add(list, topic, RD_KAFKA_PARTITION_UA) }
        let result = rd_kafka_subscribe(client, list)
        guard result == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(result, context: "subscribe") }
    }

    /// Moves the fetch position of `partitions` (assigned here) back to their committed offsets (the beginning when
    /// none is committed), so that records fetched since are read again. Blocking, at most `timeoutMs`.
    public func seekToCommitted(_ partitions: [TopicPartition], timeoutMs: Int32) throws {
        guard !partitions.isEmpty else { return }
        let list = try Self.list(Dictionary(uniqueKeysWithValues: partitions.map { ($0, Int64(RD_KAFKA_OFFSET_INVALID)) }))
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let committed = rd_kafka_committed(client, list, timeoutMs)
        guard committed == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(committed, context: "committed offsets") }
        for index in 0..<Int(list.pointee.cnt) where list.pointee.elems[index].offset < 0 {
            list.pointee.elems[index].offset = Int64(RD_KAFKA_OFFSET_BEGINNING)
        }
        try seek(list, timeoutMs: timeoutMs)
    }

    /// Moves the fetch position of `offsets`' partitions (assigned here, their fetchers started) to the given offsets.
    /// Records fetched before are discarded, not returned by a later ``poll(timeoutMs:)``. Blocking, at most `timeoutMs`.
    public func seek(_ offsets: [TopicPartition: Int64], timeoutMs: Int32) throws {
        guard !offsets.isEmpty else { return }
        let list = try Self.list(offsets)
        defer { rd_kafka_topic_partition_list_destroy(list) }
        try seek(list, timeoutMs: timeoutMs)
    }

    /// Seeks the list's partitions to its offsets; a failure of the call or of one partition is thrown.
    private func seek(_ list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>, timeoutMs: Int32) throws {
        if let error = rd_kafka_seek_partitions(client, list, timeoutMs) {
            defer { rd_kafka_error_destroy(error) }
            throw KafkaError(code: rd_kafka_error_code(error).rawValue, message: String(cString: rd_kafka_error_string(error)))
        }
        for index in 0..<Int(list.pointee.cnt) where list.pointee.elems[index].err != RD_KAFKA_RESP_ERR_NO_ERROR {
            let element = list.pointee.elems[index]
            throw KafkaError(element.err, context: "seek \(String(cString: element.topic)) [\(element.partition)]")
        }
    }

    public enum PollResult: Sendable {
        case record(KafkaRecord)
        case error(KafkaError)
        case none
    }

    /// Waits up to `timeoutMs` for a record. Rebalance callbacks run inside this call. Blocking.
    public func poll(timeoutMs: Int32) -> PollResult {
        guard let message = rd_kafka_consumer_poll(client, timeoutMs) else { return .none }
        defer { rd_kafka_message_destroy(message) }
        if message.pointee.err != RD_KAFKA_RESP_ERR_NO_ERROR {
            let text = rd_kafka_message_errstr(message).map { String(cString: $0) } ?? ""
            return .error(KafkaError(code: message.pointee.err.rawValue, message: text))
        }
        return .record(KafkaRecord(message: message))
    }

    /// Stores the next offsets to consume (last finished record + 1); they are committed asynchronously.
    /// Partitions no longer assigned are ignored.
    public func storeOffsets(_ offsets: [TopicPartition: Int64]) {
        guard !offsets.isEmpty, let list = rd_kafka_topic_partition_list_new(Int32(offsets.count)) else { return }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for (partition, offset) in offsets {
            rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)?.pointee.offset = offset
        }
        let result = rd_kafka_offsets_store(client, list)
        if result != RD_KAFKA_RESP_ERR_NO_ERROR && result != RD_KAFKA_RESP_ERR__STATE {
            logger.warning("storing offsets failed", metadata: [LoggingKeys.error: "\(KafkaError(result, context: "offsets_store"))"])
        }
    }

    /// Commits the stored offsets now and waits for the result. Blocking.
    public func commitStoredOffsets() throws {
        let result = rd_kafka_commit(client, nil, 0)
        if result != RD_KAFKA_RESP_ERR_NO_ERROR && result != RD_KAFKA_RESP_ERR__NO_OFFSET {
            throw KafkaError(result, context: "commit")
        }
    }

    /// Reads `partitions` from the given offsets (`RD_KAFKA_OFFSET_BEGINNING` is -2), without group management.
    public func assign(_ offsets: [TopicPartition: Int64]) throws {
        guard let list = rd_kafka_topic_partition_list_new(Int32(offsets.count)) else {
            throw KafkaError(message: "cannot allocate a partition list")
        }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for (partition, offset) in offsets {
            rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)?.pointee.offset = offset
        }
        let result = rd_kafka_assign(client, list)
        guard result == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(result, context: "assign") }
    }

    /// Adds partitions to a reader's assignment, each from the given offset (`-2`: beginning), keeping the
    /// others where they are.
    public func addAssignment(_ offsets: [TopicPartition: Int64]) throws {
        guard !offsets.isEmpty else { return }
        let list = try Self.list(offsets)
        defer { rd_kafka_topic_partition_list_destroy(list) }
        if let error = rd_kafka_incremental_assign(client, list) {
            defer { rd_kafka_error_destroy(error) }
            throw KafkaError(rd_kafka_error_code(error), context: "incremental assign")
        }
    }

    /// Removes partitions from a reader's assignment.
    public func removeAssignment(_ partitions: [TopicPartition]) throws {
        guard !partitions.isEmpty else { return }
        let list = try Self.list(Dictionary(uniqueKeysWithValues: partitions.map { ($0, Int64(-1001)) }))
        defer { rd_kafka_topic_partition_list_destroy(list) }
        if let error = rd_kafka_incremental_unassign(client, list) {
            defer { rd_kafka_error_destroy(error) }
            throw KafkaError(rd_kafka_error_code(error), context: "incremental unassign")
        }
    }

    /// Stops fetching `partitions` (their records stop arriving) until ``resume(_:)``.
    public func pause(_ partitions: [TopicPartition]) {
        guard !partitions.isEmpty, let list = try? Self.list(Dictionary(uniqueKeysWithValues: partitions.map { ($0, Int64(-1001)) }))
        else { return }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let result = rd_kafka_pause_partitions(client, list)
        if result != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("pausing partitions failed", metadata: [LoggingKeys.error: "\(KafkaError(result, context: "pause"))"])
        }
    }

    /// Fetches `partitions` again. Safe from any thread.
    public func resume(_ partitions: [TopicPartition]) {
        guard !partitions.isEmpty, let list = try? Self.list(Dictionary(uniqueKeysWithValues: partitions.map { ($0, Int64(-1001)) }))
        else { return }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let result = rd_kafka_resume_partitions(client, list)
        if result != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("resuming partitions failed", metadata: [LoggingKeys.error: "\(KafkaError(result, context: "resume"))"])
        }
    }

    /// The group member id the coordinator gave this consumer, nil before it joined.
    public var memberID: String? {
        guard let pointer = rd_kafka_memberid(client) else { return nil }
        defer { rd_kafka_mem_free(client, pointer) }
        let id = String(cString: pointer)
        return id.isEmpty ? nil : id
    }

    private static func list(_ offsets: [TopicPartition: Int64]) throws -> UnsafeMutablePointer<rd_kafka_topic_partition_list_t> {
        guard let list = rd_kafka_topic_partition_list_new(Int32(offsets.count)) else {
            throw KafkaError(message: "cannot allocate a partition list")
        }
        for (partition, offset) in offsets {
            rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)?.pointee.offset = offset
        }
        return list
    }

    /// The number of partitions of `topic`, asked of the broker. Blocking.
    public func partitionCount(topic: String, timeoutMs: Int32) throws -> Int32 {
        guard let handle = rd_kafka_topic_new(client, topic, nil) else { throw KafkaError(message: "cannot open topic \(topic)") }
        defer { rd_kafka_topic_destroy(handle) }
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let result = rd_kafka_metadata(client, 0, handle, &metadata, timeoutMs)
        guard result == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else { throw KafkaError(result, context: "metadata of \(topic)") }
        defer { rd_kafka_metadata_destroy(metadata) }
        guard metadata.pointee.topic_cnt == 1, let topics = metadata.pointee.topics else {
            throw KafkaError(message: "no metadata for topic \(topic)")
        }
        let entry = topics[0]
        guard entry.err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(entry.err, context: "topic \(topic)") }
        return entry.partition_cnt
    }

    /// The high watermark of a partition (the offset the next record will get), asked of the broker. Blocking.
    public func highWatermark(_ partition: TopicPartition, timeoutMs: Int32) throws -> Int64 {
        var low: Int64 = 0
        var high: Int64 = 0
        let result = rd_kafka_query_watermark_offsets(client, partition.topic, partition.partition, &low, &high, timeoutMs)
        guard result == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(result, context: "watermarks of \(partition)") }
        return high
    }

    /// Current assignment.
    public func assignment() -> [TopicPartition] {
        var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        guard rd_kafka_assignment(client, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list else { return [] }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        return [TopicPartition](list: list)
    }

    /// Leaves the group: revokes the assignment (committing stored offsets) and closes. Blocking.
    public func close() {
        guard !closed else { return }
        closed = true
        let result = rd_kafka_consumer_close(client)
        if result != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("consumer close", metadata: [LoggingKeys.error: "\(KafkaError(result, context: "close"))"])
        }
    }

    deinit {
        close()
        rd_kafka_destroy(client)
    }
}

/// Applies assignments (eager or cooperative protocol) after telling the owner.
private func kafkaRebalanceCallback(
    _ client: OpaquePointer?, _ error: rd_kafka_resp_err_t, _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
    _ opaque: UnsafeMutableRawPointer?
) {
    guard let client else { return }
    let callbacks = opaque.map { Unmanaged<ClientCallbacks>.fromOpaque($0).takeUnretainedValue() }
    let cooperative = rd_kafka_rebalance_protocol(client).map { String(cString: $0) } == "COOPERATIVE"
    let list = [TopicPartition](list: partitions)
    // The group's partitions plus their companions' (the same partition numbers), applied in one call.
    var applied = partitions
    if let partitions, let companions = callbacks?.companions, !companions.isEmpty, let copy = rd_kafka_topic_partition_list_copy(partitions) {
        for partition in list {
            if let companion = companions[partition.topic] { rd_kafka_topic_partition_list_add(copy, companion, partition.partition) }
        }
        applied = copy
    }
    defer { if applied != partitions, let applied { rd_kafka_topic_partition_list_destroy(applied) } }
    switch error {
    case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
        if cooperative {
            if let failure = rd_kafka_incremental_assign(client, applied) {
                companionFailed(failure, callbacks)
                // The group's own partitions at least (a companion partition was already assigned: all or nothing).
                if applied != partitions, let retry = rd_kafka_incremental_assign(client, partitions) { rd_kafka_error_destroy(retry) }
            }
        } else {
            rd_kafka_assign(client, applied)
        }
        callbacks?.logger.info("partitions assigned", metadata: [LoggingKeys.kafkaPartitions: "\(list)"])
        callbacks?.onRebalance?(.assigned(list))
    case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
        let lost = rd_kafka_assignment_lost(client) != 0
        callbacks?.logger.info("partitions revoked", metadata: [LoggingKeys.kafkaPartitions: "\(list)", LoggingKeys.kafkaLost: "\(lost)"])
        callbacks?.onRebalance?(.revoked(list, lost: lost))
        if cooperative {
            if let failure = rd_kafka_incremental_unassign(client, applied) {
                companionFailed(failure, callbacks)
                if applied != partitions, let retry = rd_kafka_incremental_unassign(client, partitions) { rd_kafka_error_destroy(retry) }
            }
        } else {
            rd_kafka_assign(client, nil)
        }
    default:
        callbacks?.logger.error("rebalance error", metadata: [LoggingKeys.error: "\(KafkaError(error, context: "rebalance"))"])
        rd_kafka_assign(client, nil)
    }
}

/// Logs (and frees) a failed incremental (un)assignment of the rebalance callback.
private func companionFailed(_ failure: OpaquePointer, _ callbacks: ClientCallbacks?) {
    defer { rd_kafka_error_destroy(failure) }
    let text = rd_kafka_error_string(failure).map { String(cString: $0) } ?? ""
    callbacks?.logger.error("rebalance: applying the assignment failed", metadata: [LoggingKeys.error: "\(text)"])
}
