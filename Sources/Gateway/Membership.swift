import Foundation
import GatewayLogging
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
/// otherwise; it reads every record. The topic is a trust boundary (docs/SECURITY.md): a record counts only when
/// it is signed with the cluster secret (``ClusterKey``), its address is a plain `http(s)://host:port`, and its
/// `seq` is newer than the last one of its instance; without a secret no other replica's record counts (a lone
/// replica needs none). Nothing in a record is trusted for time: a replica is live while a record of it was
/// received within `expiry` (this replica's monotonic clock), and of two claims of a partition (a rebalance in
/// progress) the later one in the topic wins. Replicas not heard from within `expiry` are forgotten. The owner
/// itself refuses a call for a partition it does not hold (the forwarder then asks again), so a stale view costs
/// a retry, never a wrong answer.
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
    private let key: ClusterKey?
    private let metrics: GatewayMetrics?
    private let standbyReplicas: Int
    private let heartbeat: Duration
    private let expiry: Duration
    private let logger: Logger
    /// More members than this are not tracked (a flood of signed records cannot grow memory without bound).
    static let maximumMembers = 1024

    /// Another replica as last heard of.
    private struct Member {
        var record: MemberRecord
        /// Its position in the members topic: of two claims of a partition, the later one wins.
        var offset: Int64
        /// When its latest record was received (this replica's clock).
        var heardAt: ContinuousClock.Instant
    }

    private struct State {
        var members: [String: Member] = [:]
        var seq: Int64 = 0
        var generation: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
        var standbys: Set<Int32> = []
    }

    private let state = Mutex(State())
    /// What this replica owns and has loaded: its record says so, and calls for those partitions are answered here.
    private let ownership: PartitionOwnership
    private let stopping = Atomic<Bool>(false)
    private let shuttingDown = Atomic<Bool>(false)

    /// The replica is shutting down: calls no longer wait for an owner to appear (a call held past the shutdown
    /// bound would make the process exit with an error).
    var isShuttingDown: Bool { shuttingDown.load(ordering: .relaxed) }

    /// Called as the shutdown begins: the calls waiting for a view change are woken (they answer 503 now).
    func shutdownBegins() {
        shuttingDown.store(true, ordering: .relaxed)
        noteChange()
    }

    init(
        consumer: any LogReader, sink: any RecordSink, store: StateStore, ownership: PartitionOwnership, topic: String,
        group: String, address: String,
        key: ClusterKey? = nil, metrics: GatewayMetrics? = nil,
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
        self.key = key
        self.metrics = metrics
        self.standbyReplicas = standbyReplicas
        self.heartbeat = heartbeat
        self.expiry = expiry
        self.logger = logger
        self.ownership = ownership
        ownership.onChange { [weak self] _ in self?.ownershipChanged() }
    }

    // MARK: This replica

    /// The consumer group changed what this replica owns, or a partition finished loading (``PartitionOwnership``).
    private func ownershipChanged() {
        publish()
        noteChange()
    }

    private func publish() {
        let mine = ownership.snapshot
        let record = state.withLock { state in
            state.seq += 1
            return MemberRecord(
                instance: instance, group: group, address: address, owned: mine.owned.sorted(), ready: mine.ready.sorted(),
                seq: state.seq, updatedAtMs: ClusterKey.wallClockMs())
        }
        let keyBytes = Array(instance.utf8)
        let value = record.value
        let headers = key.map { [$0.signMember(key: keyBytes, value: value)] } ?? []
        let kafkaRecord = KafkaRecord(topic: topic, partition: 0, key: keyBytes, value: value, headers: headers)
        if let error = sink.produce(kafkaRecord, completion: { [logger] result in
            if case .failure(let error) = result {
                logger.warning("membership record not written", metadata: [LoggingKeys.error: "\(error)"])
            }
        }) {
            logger.warning("membership record not written", metadata: [LoggingKeys.error: "\(error)"])
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
        let now = ContinuousClock.now
        let mine = ownership.snapshot
        if mine.owned.contains(partition) { return .local(ready: mine.ready.contains(partition)) }
        return state.withLock { state in
            guard let owner = Self.owner(of: partition, among: state.members.values, now: now, expiry: expiry) else { return .unknown }
            return .remote(address: owner.record.address, ready: owner.record.ready.contains(partition))
        }
    }

    /// The live member whose claim of `partition` is the latest in the topic.
    private static func owner(
        of partition: Int32, among members: some Collection<Member>, now: ContinuousClock.Instant, expiry: Duration
    ) -> Member? {
        members.filter { now - $0.heardAt < expiry && $0.record.owned.contains(partition) }.max { $0.offset < $1.offset }
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
        let now = ContinuousClock.now
        let owned = ownership.snapshot.owned
        return state.withLock { state in
            let live = state.members.values.filter { now - $0.heardAt < expiry }
            let liveInstances = live.map(\.record.instance) + [instance]
            var result: Set<Int32> = []
            for partition in 0..<partitionCount where !owned.contains(partition) {
                guard let owner = Self.owner(of: partition, among: live, now: now, expiry: expiry) else { continue }
                let candidates: [(instance: String, rank: UInt64)] = liveInstances.filter { $0 != owner.record.instance }.map {
                    (instance: $0, rank: Self.rank(partition: partition, instance: $0))
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
        let wanted = standbyPartitions(partitionCount: store.partitionCount).union(ownership.snapshot.owned)
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
            logger.error("cannot read the members topic", metadata: [LoggingKeys.kafkaTopic: "\(topic)", LoggingKeys.error: "\(error)"])
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
            forgetSilentMembers()
            placeStandbys()
        }
        stopping.store(true, ordering: .relaxed)
        // Leaving: a tombstone, so that nobody forwards here any more.
        let keyBytes = Array(instance.utf8)
        let headers = key.map { [$0.signMember(key: keyBytes, value: [])] } ?? []
        _ = try? await sink.write([KafkaRecord(topic: topic, partition: 0, key: keyBytes, value: [], headers: headers)])
    }

    private func read() {
        if key == nil {
            logger.warning(
                "no cluster secret (cluster.secretFile): other replicas' members records are ignored and no call is forwarded; set one when running more than one replica")
        }
        let limiter = LogLimiter()
        while !stopping.load(ordering: .relaxed) {
            switch consumer.poll(timeoutMs: 100) {
            case .none, .error: continue
            case .record(let record):
                guard let keyBytes = record.key, let name = record.keyString, name != instance else { continue }
                if let reason = accept(record, key: keyBytes, name: name) {
                    metrics?.clusterMessageRefused("member", reason: reason)
                    if case .log(let suppressed) = limiter.decide(facility: reason) {
                        logger.warning(
                            "members record refused", metadata: [LoggingKeys.reason: "\(reason)", LoggingKeys.kafkaOffset: "\(record.offset)", LoggingKeys.suppressed: "\(suppressed)"])
                    }
                    continue
                }
                noteChange()
            }
        }
        consumer.close()
    }

    /// Applies a record of another replica; the reason it was refused, or nil.
    private func accept(_ record: KafkaRecord, key keyBytes: [UInt8], name: String) -> String? {
        guard let key else { return "no_cluster_secret" }
        guard key.verifyMember(key: keyBytes, value: record.value, signature: record.header(ClusterKey.memberSignatureHeader)) else {
            return record.header(ClusterKey.memberSignatureHeader) == nil ? "unsigned" : "bad_signature"
        }
        if record.value.isEmpty {
            state.withLock { _ = $0.members.removeValue(forKey: name) }
            return nil
        }
        guard let member = MemberRecord.decode(instance: name, value: record.value) else { return "invalid" }
        guard member.group == group else { return "other_group" }
        let now = ContinuousClock.now
        return state.withLock { state -> String? in
            if let known = state.members[name] {
                guard member.seq > known.record.seq else { return "replayed" }
            } else if state.members.count >= Self.maximumMembers {
                return "too_many_members"
            }
            state.members[name] = Member(record: member, offset: record.offset, heardAt: now)
            return nil
        }
    }

    /// Forgets the replicas not heard from within `expiry` (crashed ones never write a tombstone).
    private func forgetSilentMembers() {
        let now = ContinuousClock.now
        let forgotten = state.withLock { state -> Int in
            let before = state.members.count
            state.members = state.members.filter { now - $0.value.heardAt < expiry }
            return before - state.members.count
        }
        if forgotten > 0 { noteChange() }
    }
}
