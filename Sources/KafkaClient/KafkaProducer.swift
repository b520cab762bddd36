import CRdKafka
import Foundation
import GatewayLogging
import Logging

/// An idempotent producer (acks=all) over librdkafka. Delivery reports are served by a dedicated polling
/// thread; ``send(_:)`` returns once the broker has acknowledged the record.
public final class KafkaProducer: @unchecked Sendable {
    private let client: OpaquePointer
    private let callbacks: ClientCallbacks
    private let logger: Logger
    private let running = NSLock()
    private var isRunning = true
    private var pollThread: Thread?
    private let stopped = DispatchSemaphore(value: 0)

    /// `onEvent` hears of errors outside of records (a fatal one makes this producer unusable).
    public init(properties: [String: String], logger: Logger, onEvent: (@Sendable (ClientEvent) -> Void)? = nil) throws {
        var merged = [
            "enable.idempotence": "true",
            "acks": "all",
            "linger.ms": "5",
            "message.timeout.ms": "60000",
        ]
        for (key, value) in properties { merged[key] = value }
        let config = try KafkaConfig(merged)
        let callbacks = ClientCallbacks(logger: logger, onEvent: onEvent)
        callbacks.install(on: config)
        rd_kafka_conf_set_dr_msg_cb(config.handle, kafkaDeliveryCallback)
        self.client = try makeClient(type: RD_KAFKA_PRODUCER, config: config)
        self.callbacks = callbacks
        self.logger = logger
        nonisolated(unsafe) let polled = client
        let thread = Thread { [stopped, weak self] in
            while self?.stillRunning ?? false { rd_kafka_poll(polled, 100) }
            stopped.signal()
        }
        thread.name = "kafka-producer-poll"
        thread.start()
        pollThread = thread
    }

    private var stillRunning: Bool { running.withLock { isRunning } }

    /// Produces a record and waits for its delivery report; returns where the record was written. An empty
    /// value is produced as null (a tombstone).
    @discardableResult
    public func send(_ record: KafkaRecord) async throws -> (partition: Int32, offset: Int64) {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(partition: Int32, offset: Int64), any Error>) in
            send(record) { result in continuation.resume(with: result.mapError { $0 as any Error }) }
        }
    }

    /// Produces a record; `completion` runs on the polling thread with the delivery result.
    public func send(_ record: KafkaRecord, completion: @escaping @Sendable (KafkaError?) -> Void) {
        send(record) { (result: Result<(partition: Int32, offset: Int64), KafkaError>) in
            if case .failure(let error) = result { completion(error) } else { completion(nil) }
        }
    }

    /// Produces a record; `completion` runs on the polling thread with the partition and offset, or the error.
    public func send(
        _ record: KafkaRecord, completion: @escaping @Sendable (Result<(partition: Int32, offset: Int64), KafkaError>) -> Void
    ) {
        if let error = enqueue(record, completion: completion) { completion(.failure(error)) }
    }

    /// Queues a record without blocking. Returns the error when it could not even be queued (the queue is
    /// full, the producer is closed...): `completion` is then never called. Otherwise `completion` runs later,
    /// on the polling thread, never inside this call, so the caller may hold a lock here.
    public func enqueue(
        _ record: KafkaRecord, completion: @escaping @Sendable (Result<(partition: Int32, offset: Int64), KafkaError>) -> Void
    ) -> KafkaError? {
        // After close nobody serves delivery reports: the completion would never run.
        guard stillRunning else { return KafkaError(message: "the producer is closed") }
        let box = Unmanaged.passRetained(DeliveryBox(completion))

        let result: rd_kafka_resp_err_t = record.topic.withCString { topic in
            record.value.withUnsafeBytes { value in
                (record.key ?? []).withUnsafeBytes { key in
                    produce(topic: topic, record: record, value: value, key: key, opaque: box.toOpaque())
                }
            }
        }
        if result != RD_KAFKA_RESP_ERR_NO_ERROR {
            box.release()
            return KafkaError(result, context: "produce to \(record.topic)")
        }
        return nil
    }

    private func produce(
        topic: UnsafePointer<CChar>, record: KafkaRecord, value: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer,
        opaque: UnsafeMutableRawPointer
    ) -> rd_kafka_resp_err_t {
        // Header names must be C strings that live through the call.
        let names = record.headers.map { strdup($0.name) }
        defer { names.forEach { free($0) } }
        var values = record.headers.map { $0.value }
        var fields: [rd_kafka_vu_t] = []
        var field = rd_kafka_vu_t()
        field.vtype = RD_KAFKA_VTYPE_TOPIC
        field.u.cstr = topic
        fields.append(field)
        field = rd_kafka_vu_t()
        field.vtype = RD_KAFKA_VTYPE_MSGFLAGS
        field.u.i = RD_KAFKA_MSG_F_COPY
        fields.append(field)
        if record.partition >= 0 {
            field = rd_kafka_vu_t()
            field.vtype = RD_KAFKA_VTYPE_PARTITION
            field.u.i32 = record.partition
            fields.append(field)
        }
        // An empty value is sent as null: a tombstone, which log compaction deletes.
        if !value.isEmpty {
            field = rd_kafka_vu_t()
            field.vtype = RD_KAFKA_VTYPE_VALUE
            field.u.mem.ptr = UnsafeMutableRawPointer(mutating: value.baseAddress)
            field.u.mem.size = value.count
            fields.append(field)
        }
        if record.key != nil {
            field = rd_kafka_vu_t()
            field.vtype = RD_KAFKA_VTYPE_KEY
            field.u.mem.ptr = UnsafeMutableRawPointer(mutating: key.baseAddress)
            field.u.mem.size = key.count
            fields.append(field)
        }
        field = rd_kafka_vu_t()
        field.vtype = RD_KAFKA_VTYPE_OPAQUE
        field.u.ptr = opaque
        fields.append(field)
        return values.withUnsafeMutableBufferPointer { headerValues in
            var pointers: [UnsafeMutableRawPointer?] = []
            for index in headerValues.indices {
                let size = headerValues[index].count
                let copy = malloc(max(size, 1))
                headerValues[index].withUnsafeBytes { bytes in
                    if let copy, let base = bytes.baseAddress, size > 0 { memcpy(copy, base, size) }
                }
                pointers.append(copy)
                var header = rd_kafka_vu_t()
                header.vtype = RD_KAFKA_VTYPE_HEADER
                header.u.header.name = UnsafePointer(names[index])
                header.u.header.val = UnsafeRawPointer(copy)
                header.u.header.size = size
                fields.append(header)
            }
            defer { pointers.forEach { free($0) } }
            guard let error = rd_kafka_produceva(client, fields, fields.count) else { return RD_KAFKA_RESP_ERR_NO_ERROR }
            let code = rd_kafka_error_code(error)
            rd_kafka_error_destroy(error)
            return code
        }
    }

    /// Raises a fatal error on this producer as if the broker had caused it (`rd_kafka_test_fatal_error`), for
    /// fault tests: the client becomes unusable, and the error callback reports it like a real one.
    public func injectFatalError(code: Int32, reason: String) -> Bool {
        rd_kafka_test_fatal_error(client, rd_kafka_resp_err_t(rawValue: code), reason) == RD_KAFKA_RESP_ERR_NO_ERROR
    }

    /// Waits until every queued record is delivered or `timeoutMs` passes. Blocking.
    public func flush(timeoutMs: Int32) -> Bool {
        rd_kafka_flush(client, timeoutMs) == RD_KAFKA_RESP_ERR_NO_ERROR
    }

    /// Flushes (at most `flushTimeoutMs`), fails what is left (each gets its failed delivery report, so that
    /// nobody waits for it), then stops the polling thread. Blocking.
    public func close(flushTimeoutMs: Int32 = 10_000) {
        let wasRunning = running.withLock { () -> Bool in
            defer { isRunning = false }
            return isRunning
        }
        guard wasRunning else { return }
        if !flush(timeoutMs: flushTimeoutMs) {
            let left = rd_kafka_outq_len(client)
            logger.warning("producer closed with undelivered records: they are failed", metadata: [LoggingKeys.kafkaOutq: "\(left)"])
            rd_kafka_purge(client, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
            // Serves the failed delivery reports of what was purged.
            _ = rd_kafka_flush(client, 1000)
        }
        stopped.wait()
    }

    deinit {
        close(flushTimeoutMs: 0)
        rd_kafka_destroy(client)
    }
}

private final class DeliveryBox {
    let completion: @Sendable (Result<(partition: Int32, offset: Int64), KafkaError>) -> Void
    init(_ completion: @escaping @Sendable (Result<(partition: Int32, offset: Int64), KafkaError>) -> Void) {
        self.completion = completion
    }
}

private func kafkaDeliveryCallback(
    _ client: OpaquePointer?, _ message: UnsafePointer<rd_kafka_message_t>?, _ opaque: UnsafeMutableRawPointer?
) {
    guard let message, let privateData = message.pointee._private else { return }
    let box = Unmanaged<DeliveryBox>.fromOpaque(privateData).takeRetainedValue()
    let error = message.pointee.err
    if error == RD_KAFKA_RESP_ERR_NO_ERROR {
        box.completion(.success((message.pointee.partition, message.pointee.offset)))
    } else {
        let status = rd_kafka_message_status(message)
        box.completion(.failure(KafkaError(error, context: "delivery", possiblyPersisted: status != RD_KAFKA_MSG_STATUS_NOT_PERSISTED)))
    }
}
