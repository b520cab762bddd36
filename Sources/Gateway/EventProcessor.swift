import Dispatch
import EventDecoding
import Foundation
import GatewayLogging
import KafkaClient
import Logging
import PushCore
import Synchronization

/// What happens to one change record, on the consumer's thread and in log order: decoded (or dead-lettered
/// with the reason), matched in its partition (``PartitionState/process(_:profile:now:eventTime:ticket:tickets:delivery:payloads:)``),
/// its notifications queued for delivery. The record's offset moves once its ticket is released by every
/// part of its work (``EventTickets``).
final class EventProcessor: Sendable {
    private let store: StateStore
    private let delivery: any DeliveryInput
    private let tickets: EventTickets
    private let ledger: OffsetLedger
    private let payloads: PayloadBuilder
    private let sink: any RecordSink
    private let deadLetterTopic: String
    /// The user-notifications topic (read with the change topic, partition p with partition p), nil when not read.
    private let userNotificationsTopic: String?
    private let metrics: GatewayMetrics
    private let logger: Logger
    private let partitionWarned = Atomic<Bool>(false)

    init(
        store: StateStore, delivery: any DeliveryInput, tickets: EventTickets, ledger: OffsetLedger,
        payloads: PayloadBuilder, sink: any RecordSink, deadLetterTopic: String, userNotificationsTopic: String? = nil,
        metrics: GatewayMetrics, logger: Logger
    ) {
        self.userNotificationsTopic = userNotificationsTopic
        self.store = store
        self.delivery = delivery
        self.tickets = tickets
        self.ledger = ledger
        self.payloads = payloads
        self.sink = sink
        self.deadLetterTopic = deadLetterTopic
        self.metrics = metrics
        self.logger = logger
    }

    /// Handles one record. Blocks while too many records are unfinished.
    /// A record admitted on the poll thread, to be matched on its partition's worker.
    struct Admitted: Sendable {
        let record: KafkaRecord
        let ticket: UInt64
        /// The partition's state when the record was admitted: a record admitted before the partition was given up
        /// and taken back (loaded again, read again from its committed offset) is not matched by the new one.
        let owner: PartitionState
        /// When the consumer's poll returned the record (``Uptime``), for the gateway's own latency.
        let fetchedAt: UInt64
    }

    /// On the poll thread, in the partition's order: waits for capacity, and tracks the record (its offset, its
    /// ticket) when this replica owns its partition. Nil: nothing to do (left to the partition's next owner).
    /// `fetchedAt`: when the poll returned it (``Uptime``).
    func admit(_ record: KafkaRecord, fetchedAt: UInt64) -> Admitted? {
        ledger.waitForCapacity()
        // A record of a partition given up (revoked, or superseded) that was already fetched: left to the partition's
        // next owner, which reads it again from the committed offset. Not tracked here: nothing of it may hold the
        // partition's offsets or this replica's capacity.
        guard let owner = store.partition(record.partition), owner.role == .owner else {
            ledger.giveBack()
            return nil
        }
        let companion = isUserNotification(record)
        ledger.start(partition: record.partition, offset: record.offset, companion: companion)
        let ticket = tickets.open(partition: record.partition, offset: record.offset, topic: companion ? record.topic : nil)
        return Admitted(record: record, ticket: ticket, owner: owner, fetchedAt: fetchedAt)
    }

    private func isUserNotification(_ record: KafkaRecord) -> Bool {
        guard let userNotificationsTopic else { return false }
        return record.topic.bytesEqual(userNotificationsTopic)
    }

    /// On the partition's worker: decodes, dead-letters or matches the record, and releases its ticket. The app's
    /// profile is read through the worker's reader (`worker`: ``PartitionWorkers/Local``), which takes no lock while
    /// settings do not change, and goes with the notifications into the delivery service (``DeliveryInput/enqueue(_:fetchedAt:profile:)``),
    /// which chooses their lanes by it. The lanes read the app's settings again when they send (their own reader):
    /// a notification retried later, or stored and adopted, is sent with the settings current then.
    func process(_ admitted: Admitted, on worker: PartitionWorkers.Local) {
        let (record, ticket) = (admitted.record, admitted.ticket)
        defer { tickets.release(ticket) }
        guard store.isCurrent(admitted.owner, index: record.partition) else {
            // Given up (and perhaps taken back) since it was admitted: the partition's owner reads it again.
            tickets.retain(ticket)
            return
        }
        if isUserNotification(record) { return notifyUser(admitted, on: worker) }
        let event: ChangeEvent
        do {
            event = try EventDecoder.decode(
                value: record.value, contentType: record.header(EventDecoder.contentTypeHeader), key: record.key)
        } catch {
            tickets.retain(ticket)
            return deadLetter(record, reason: error.reason, ticket: ticket)
        }
        let keyless = record.key?.isEmpty ?? true
        if keyless || record.partition != store.partitionIndex(ofApp: event.app), !partitionWarned.exchange(true, ordering: .relaxed) {
            logger.error(
                keyless
                    ? "record without a key: publishers must set the record key to the app id, so that an app's events share one partition and stay in order (docs/PUBLISHING.md); delivered anyway"
                    : "kafka.partitioner does not match the publishers': set it to their partitioner (murmur2_random for Java clients)",
                metadata: [LoggingKeys.app: "\(event.app)", LoggingKeys.kafkaPartition: "\(record.partition)"])
        }
        guard let profile = worker.profile(event.app) else {
            metrics.eventsSkipped.increment()
            return
        }
        guard admitted.owner.role == .owner else {
            // Given up while the record was in flight (its role is lock-free): the new owner consumes it again.
            tickets.retain(ticket)
            return
        }
        // The app's state is in the partition its id maps to. A record found elsewhere (no key, or another
        // partitioner) is matched there when this replica owns that partition too, else dead-lettered: its
        // app's owner never sees this partition.
        let home = store.partitionIndex(ofApp: event.app)
        guard let partition = store.partition(home), partition.role == .owner else {
            tickets.retain(ticket)
            return deadLetter(
                record,
                reason: "misrouted: app \(event.app.prefix(64))'s events belong to partition \(home), this record is in partition \(record.partition) (the record key must be the app id, and kafka.partitioner the publishers' partitioner)",
                ticket: ticket)
        }
        let timestamp = event.timestampMs > 0 ? event.timestampMs : (record.timestampMs ?? 0)
        let now = Date().timeIntervalSince1970
        let outcome = partition.process(
            event, offset: record.offset, profile: profile, now: Int64(now), eventTime: timestamp > 0 ? Double(timestamp) / 1000 : nil,
            fetchedAt: admitted.fetchedAt, ticket: ticket, tickets: tickets,
            delivery: delivery, payloads: payloads)
        metrics.eventsConsumed.increment()
        if outcome.notifications > 0 { metrics.eventsMatched.increment() }
        if outcome.expired > 0 {
            revoked(outcome.expired, reason: "expired", app: event.app, record: record, after: outcome.afterOffset)
        }
        if outcome.revoked > 0 {
            let reason = event.operation == .namespaceDeleted ? "namespace_does_not_exist" : "too_big"
            revoked(outcome.revoked, reason: reason, app: event.app, record: record, after: outcome.afterOffset)
        }
    }

    /// A record of the user-notifications topic: decoded (or dead-lettered), sent to each device of its uid by the
    /// app's partition (the one its key maps to, owned here: the topic is partitioned like the change topic).
    private func notifyUser(_ admitted: Admitted, on worker: PartitionWorkers.Local) {
        let (record, ticket) = (admitted.record, admitted.ticket)
        let notification: UserNotification
        do {
            notification = try UserNotificationDecoder.decode(
                value: record.value, contentType: record.header(EventDecoder.contentTypeHeader), key: record.key)
        } catch {
            tickets.retain(ticket)
            return deadLetter(record, reason: error.reason, ticket: ticket)
        }
        guard let profile = worker.profile(notification.app) else {
            metrics.eventsSkipped.increment()
            return
        }
        let home = store.partitionIndex(ofApp: notification.app)
        guard let partition = store.partition(home), partition.role == .owner else {
            guard admitted.owner.role == .owner else {
                tickets.retain(ticket)  // given up meanwhile: the new owner reads it again
                return
            }
            tickets.retain(ticket)
            return deadLetter(
                record,
                reason: "misrouted: app \(notification.app.prefix(64))'s user notifications belong to partition \(home), this record is in partition \(record.partition) (the record key must be the app id, and kafka.partitioner the publishers' partitioner)",
                ticket: ticket)
        }
        let timestamp = notification.timestampMs > 0 ? notification.timestampMs : (record.timestampMs ?? 0)
        let sent = partition.notifyUser(
            notification, profile: profile, now: Int64(Date().timeIntervalSince1970),
            eventTime: timestamp > 0 ? Double(timestamp) / 1000 : nil, fetchedAt: admitted.fetchedAt, ticket: ticket,
            tickets: tickets, delivery: delivery, payloads: payloads)
        metrics.userNotifications(devices: sent)
    }

    /// Counts and logs revocations made while matching `record` (as the sweep logs its own): their point is
    /// after the event at offset `after`, before this one.
    private func revoked(_ count: Int, reason: String, app: String, record: KafkaRecord, after: Int64) {
        metrics.revoked(reason: reason, count: count)
        logger.notice(
            "subscriptions revoked",
            metadata: [
                LoggingKeys.app: "\(app)", LoggingKeys.reason: "\(reason)", LoggingKeys.count: "\(count)", LoggingKeys.kafkaPartition: "\(record.partition)",
                LoggingKeys.kafkaOffset: "\(record.offset)", LoggingKeys.revocationAfterOffset: "\(after)",
            ])
    }

    private func deadLetter(_ record: KafkaRecord, reason: String, ticket: UInt64) {
        metrics.deadLetter(category: reason.hasPrefix("undecodable") ? "undecodable" : "invalid")
        metrics.eventsDeadLettered.increment()
        logger.warning(
            "record dead-lettered",
            metadata: [LoggingKeys.kafkaPartition: "\(record.partition)", LoggingKeys.kafkaOffset: "\(record.offset)", LoggingKeys.reason: "\(reason)"])
        var headers = record.headers
        headers.append(KafkaHeader(name: "x-dlq-reason", string: reason))
        headers.append(KafkaHeader(name: "x-dlq-source-topic", string: record.topic))
        headers.append(KafkaHeader(name: "x-dlq-source-partition", string: String(record.partition)))
        headers.append(KafkaHeader(name: "x-dlq-source-offset", string: String(record.offset)))
        writeDeadLetter(
            KafkaRecord(topic: deadLetterTopic, key: record.key, value: record.value, headers: headers), ticket: ticket, delay: 1)
    }

    /// The record's offset is finished only once its copy is acknowledged; until then the write is retried
    /// with backoff (the partition's commits wait, nothing is lost), while the partition is still this replica's.
    private func writeDeadLetter(_ copy: KafkaRecord, ticket: UInt64, delay: Double) {
        sink.produceUntilStored(
            copy, delay: delay, while: { [tickets] in tickets.isOpen(ticket) },
            failed: { [logger] error, delay in
                logger.error("dead-letter write failed; retrying", metadata: [LoggingKeys.error: "\(error)", LoggingKeys.retryInSeconds: "\(delay)"])
            },
            done: { [tickets] offset in if offset != nil { tickets.release(ticket) } })
    }
}
