import Foundation
import KafkaClient
import Logging
import PushCore
import ServiceLifecycle
import SSLCrypto
import Synchronization

/// Who owns which change partition, as the replicas tell each other through the members topic
/// (``MemberRecord``): the owner's advertised address is what the API forwards a call to (Kafka Streams'
/// `application.server`), and the same view places the standby copies.
///
/// Each replica writes its record whenever its owned or loaded partitions change, and every `heartbeat`
/// otherwise; it reads every record. A record older than `expiry` is a replica that is gone. When two records
/// claim a partition (a rebalance in progress), the newer one wins; the owner itself refuses a call for a
/// partition it does not hold (the forwarder then asks again), so a stale view costs a retry, never a wrong
/// answer.
///
/// Standbys: for each partition owned elsewhere, the live replicas other than its owner are ranked by a hash
/// of (partition, instance); the first `standbyReplicas` of them keep a standby copy (``StateStore``).
final class Membership: Service, Sendable {
    let instance: String
    let address: String
    private let group: String
    private let topic: String
    private let consumer: any LogReader
    private let sink: any RecordSink
    private let store: StateStore
    private let standbyReplicas: Int
    private let heartbeat: Duration
    private let expiry: Duration
    private let logger: Logger

    private struct State {
        var members: [String: MemberRecord] = [:]
        var owned: Set<Int32> = []
        var ready: Set<Int32> = []
        var generation: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
        var standbys: Set<Int32> = []
    }

    private let state = Mutex(State())
    private let stopping = Atomic<Bool>(false)

    init(
        consumer: any LogReader, sink: any RecordSink, store: StateStore, topic: String, group: String, address: String,
        standbyReplicas: Int, heartbeat: Duration = .seconds(5), expiry: Duration = .seconds(20), logger: Logger
    ) {
        var random = SystemRandomNumberGenerator()
        self.instance = String((0..<4).map { _ in String(random.next(), radix: 16) }.joined().prefix(24))
        self.consumer = consumer
        self.sink = sink
        self.store = store
        self.topic = topic
        self.group = group
        self.address = address
        self.standbyReplicas = standbyReplicas
        self.heartbeat = heartbeat
        self.expiry = expiry
        self.logger = logger
    }

    // MARK: This replica

    /// The consumer group changed what this replica owns, or a partition finished loading.
    func update(owned: Set<Int32>, ready: Set<Int32>) {
        let changed = state.withLock { state -> Bool in
            guard state.owned != owned || state.ready != ready else { return false }
            state.owned = owned
            state.ready = ready
            return true
        }
        if changed {
            publish()
            noteChange()
        }
    }

    private func publish() {
        let record = state.withLock { state in
            MemberRecord(
                instance: instance, group: group, address: address, owned: state.owned.sorted(), ready: state.ready.sorted(),
                updatedAtMs: Int64(Date().timeIntervalSince1970 * 1000))
        }
        state.withLock { $0.members[instance] = record }
        let kafkaRecord = KafkaRecord(topic: topic, partition: 0, key: Array(instance.utf8), value: record.value)
        if let error = sink.produce(kafkaRecord, completion: { [logger] result in
            if case .failure(let error) = result {
                logger.warning("membership record not written", metadata: ["error": "\(error)"])
            }
        }) {
            logger.warning("membership record not written", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Routing

    enum Route: Sendable, Equatable {
        /// This replica owns the partition (and has loaded it when `ready`).
        case local(ready: Bool)
        /// Another replica owns it.
        case remote(address: String, ready: Bool)
        /// Nobody is known to own it now (a rebalance).
        case unknown
    }

    /// Where calls for change partition `partition` go.
    func route(partition: Int32) -> Route {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let expiryMs = Int64(expiry.seconds * 1000)
        return state.withLock { state in
            if state.owned.contains(partition) { return .local(ready: state.ready.contains(partition)) }
            let claims = state.members.values.filter {
                $0.instance != instance && $0.group == group && now - $0.updatedAtMs < expiryMs && $0.owned.contains(partition)
            }
            guard let owner = claims.max(by: { $0.updatedAtMs < $1.updatedAtMs }) else { return .unknown }
            return .remote(address: owner.address, ready: owner.ready.contains(partition))
        }
    }

    /// Waits until the view changes (a record read, or this replica's ownership changed), at most `timeout`.
    func waitForChange(timeout: Duration) async {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    self.state.withLock { $0.waiters[id] = continuation }
                }
            }
            group.addTask {
                // Cancelled (the change came first, or the caller was cancelled) or timed out: either way the
                // waiter is resumed now, so the caller returns.
                do { try await Task.sleep(for: timeout) } catch {}
                let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.resume()
            }
            await group.next()
            group.cancelAll()
            let waiter = self.state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    private func noteChange() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation += 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        waiters.forEach { $0.resume() }
        placeStandbys()
    }

    // MARK: Standbys

    /// The partitions this replica should keep a standby copy of.
    func standbyPartitions(partitionCount: Int32) -> Set<Int32> {
        guard standbyReplicas > 0, partitionCount > 0 else { return [] }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let expiryMs = Int64(expiry.seconds * 1000)
        return state.withLock { state in
            let live = state.members.values.filter { $0.group == group && now - $0.updatedAtMs < expiryMs }
            var result: Set<Int32> = []
            for partition in 0..<partitionCount where !state.owned.contains(partition) {
                let owner = live.filter { $0.owned.contains(partition) }.max { $0.updatedAtMs < $1.updatedAtMs }
                guard let owner else { continue }
                let candidates: [(instance: String, rank: UInt64)] = live.filter { $0.instance != owner.instance }.map {
                    (instance: $0.instance, rank: Self.rank(partition: partition, instance: $0.instance))
                }
                let ranked = candidates.sorted { left, right in
                    left.rank != right.rank ? left.rank > right.rank : left.instance < right.instance
                }
                if ranked.prefix(standbyReplicas).contains(where: { $0.instance == instance }) { result.insert(partition) }
            }
            return result
        }
    }

    /// Rendezvous hashing: the same ranking on every replica.
    static func rank(partition: Int32, instance: String) -> UInt64 {
        let digest = SHA256.hash(Array("\(partition)/\(instance)".utf8))
        return digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    private func placeStandbys() {
        guard standbyReplicas > 0 else { return }
        // Partitions just assigned here keep their standby copy: it is about to be promoted (the load that
        // promotes it may not have started yet).
        let wanted = standbyPartitions(partitionCount: store.partitionCount).union(state.withLock { $0.owned })
        let changed = state.withLock { state -> Bool in
            guard state.standbys != wanted else { return false }
            state.standbys = wanted
            return true
        }
        if changed { store.setStandbys(wanted) }
    }

    /// True when this replica is to keep a standby copy of `partition` once it gives it up.
    func keepsStandby(of partition: Int32) -> Bool {
        standbyReplicas > 0 && standbyPartitions(partitionCount: store.partitionCount).contains(partition)
    }

    // MARK: Service

    func run() async throws {
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let thread = Thread { [consumer, topic] in
                    continuation.resume(with: Result { try consumer.addAssignment([TopicPartition(topic: topic, partition: 0): -2]) })
                }
                thread.name = "kafka-members-assign"
                thread.start()
            }
        } catch {
            logger.error("cannot read the members topic", metadata: ["kafka.topic": "\(topic)", "error": "\(error)"])
            throw error
        }
        let reader = Thread { [self] in read() }
        reader.name = "kafka-members-tail"
        reader.start()
        publish()
        while !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: self.heartbeat) }
            } catch {
                break
            }
            publish()
            placeStandbys()
        }
        stopping.store(true, ordering: .relaxed)
        // Leaving: a tombstone, so that nobody forwards here any more.
        _ = try? await sink.write([KafkaRecord(topic: topic, partition: 0, key: Array(instance.utf8), value: [])])
    }

    private func read() {
        while !stopping.load(ordering: .relaxed) {
            switch consumer.poll(timeoutMs: 100) {
            case .none, .error: continue
            case .record(let record):
                guard let key = record.keyString, key != instance else { continue }
                let member = record.value.isEmpty ? nil : MemberRecord.decode(instance: key, value: record.value)
                state.withLock { $0.members[key] = member }
                noteChange()
            }
        }
        consumer.close()
    }
}
