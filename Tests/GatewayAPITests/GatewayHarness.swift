import GatewayTesting
import GatewayCore
import Foundation
import GatewayAPI
import Hummingbird
import KafkaClient
import Logging
import Providers
import PushCore
import ServiceLifecycle
import Synchronization
import XCTest

@testable import Gateway

/// Records what the gateway sends; answers with a scripted outcome, and can hold sends back.
final class FakeSender: PushSender, Sendable {
    struct Sent: Sendable, Equatable {
        var token: String
        var payload: String
        /// What it was sent with (a user notification's TTL and collapse key).
        var options = DeliveryOptions.none
    }

    let provider: String
    let project: String
    private let state = Mutex<(sent: [Sent], attempts: [Sent], script: [String: [DeliveryOutcome]], held: Bool, waiters: [CheckedContinuation<Void, Never>])>(
        ([], [], [:], false, []))
    /// Sends in progress now, and the most there ever were at once.
    private let concurrency = Mutex<(now: Int, most: Int)>((0, 0))

    /// `provider` "fcm" or "hms" makes it a provider project's sender (``AppProfile/admissions(for:)``).
    init(provider: String = "fake", project: String = "fake") {
        self.provider = provider
        self.project = project
    }

    /// The next outcomes for `token` (then `.sent`).
    func script(_ token: String, _ outcomes: [DeliveryOutcome]) { state.withLock { $0.script[token, default: []] += outcomes } }

    /// Sends wait until ``release()``.
    func hold() { state.withLock { $0.held = true } }

    func release() { release(keepHolding: false) }

    /// Lets the sends held now go on; `keepHolding`: the next ones are held again.
    func release(keepHolding: Bool) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.held = keepHolding
            defer { state.waiters = [] }
            return state.waiters
        }
        waiters.forEach { $0.resume() }
    }

    /// Sends waiting for ``release()`` now.
    var heldCount: Int { state.withLock { $0.waiters.count } }
    /// The most sends that were in progress at once.
    var mostConcurrent: Int { concurrency.withLock { $0.most } }

    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        await send(token: token, payload: payload, messageID: "", options: .none, submission: nil)
    }

    func send(
        token: String, payload: [UInt8], messageID: String, options: DeliveryOptions, submission: RequestSubmission?
    ) async -> DeliveryOutcome {
        // Where a real sender hands its request to the HTTP client: the gateway's own latency ends here.
        submission?.submitted()
        concurrency.withLock { ($0.now, $0.most) = ($0.now + 1, max($0.most, $0.now + 1)) }
        defer { concurrency.withLock { $0.now -= 1 } }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let wait = state.withLock { state -> Bool in
                if state.held { state.waiters.append(continuation) }
                return state.held
            }
            if !wait { continuation.resume() }
        }
        return state.withLock { state in
            let sent = Sent(token: token, payload: String(decoding: payload, as: UTF8.self), options: options)
            state.attempts.append(sent)
            var outcome = DeliveryOutcome.sent
            if var scripted = state.script[token], !scripted.isEmpty {
                outcome = scripted.removeFirst()
                state.script[token] = scripted
            }
            if outcome == .sent { state.sent.append(sent) }
            return outcome
        }
    }

    /// Delivered payloads to `token`, in order.
    func sent(to token: String) -> [String] { state.withLock { $0.sent.filter { $0.token == token }.map(\.payload) } }
    var sent: [Sent] { state.withLock { $0.sent } }
    /// Every attempt to `token` (failed ones too), in order.
    func attemptsMade(to token: String) -> [Sent] { state.withLock { $0.attempts.filter { $0.token == token } } }
    func attempts(to token: String) -> Int { state.withLock { $0.attempts.filter { $0.token == token }.count } }
}

/// The gateway's core over an in-memory state log (no Kafka): the state store with every partition owned,
/// the delivery service with a fake sender, event tickets, and what finished.
final class GatewayHarness: Sendable {
    static let stateTopic = "state"
    static let partitions: Int32 = 4
    /// Delivery lanes of every harness unless a test says otherwise: the gateway's default (one per core), at least
    /// two, so that every test of the delivery path runs it split in lanes (``DeliveryService``).
    /// `GATEWAY_TEST_LANES` sets another number (1: one queue, as before lanes).
    static let lanes = ProcessInfo.processInfo.environment["GATEWAY_TEST_LANES"].flatMap { Int($0) }
        ?? max(2, ProcessInfo.processInfo.activeProcessorCount)

    let log: InMemoryLog
    let store: StateStore
    let profiles: AppProfiles
    let tickets: EventTickets
    let delivery: DeliveryService
    let sender: FakeSender
    let metrics = GatewayMetrics()
    let payloads: PayloadBuilder
    let logger = Logger(label: "test")
    private let finishedOffsets = OffsetList()
    private let running = Mutex<(group: ServiceGroup, task: Task<Void, any Error>)?>(nil)

    /// A harness sharing `log` with another one (a second replica), or with a fresh log.
    init(
        apps: [String: AppSettings], log: InMemoryLog? = nil, sender: FakeSender = FakeSender(),
        policy: RetryPolicy = RetryPolicy(initialDelay: 0.02, multiplier: 2, maximumDelay: 0.1, deadline: 60, jitter: 0),
        budget: StateBudget = StateBudget(), maxInFlight: Int = 2000, lanes: Int = GatewayHarness.lanes,
        verifier: (any LogReader)? = nil
    ) throws {
        let log = log ?? InMemoryLog(topics: [Self.stateTopic: Self.partitions])
        self.log = log
        self.sender = sender
        let logger = Logger(label: "test")
        store = StateStore(
            consumer: InMemoryLog.Reader(log: log), verifier: verifier ?? InMemoryLog.Reader(log: log), sink: log, topic: Self.stateTopic,
            partitioner: .consistentRandom, metrics: metrics, budget: budget, logger: logger)
        profiles = AppProfiles()
        let builder = AppProfileBuilder(httpClient: nil, fcm: .init(), logger: logger)
        for (name, settings) in apps {
            let built = try builder.build(name: name, settings: settings, previous: nil)
            profiles.set(
                name,
                AppProfile(
                    name: name, settings: settings, verifier: built.verifier, rules: built.rules,
                    rulesFingerprint: built.rulesFingerprint, encryption: built.encryption,
                    senders: [.mobile: sender, .huawei: sender], fcmAccountFingerprint: nil))
        }
        let finished = finishedOffsets
        tickets = EventTickets(onFinished: { _, offset in finished.append(offset) })
        payloads = PayloadBuilder(metrics: metrics, logger: logger)
        delivery = DeliveryService(
            profiles: profiles, store: store, tickets: tickets, payloads: payloads, metrics: metrics, logger: logger,
            maxInFlight: maxInFlight, policy: policy, lanes: lanes)
        let fenced = fencedPartitions
        let delivery = delivery
        let store = store
        let tickets = tickets
        store.listen(
            fenced: { index in
                fenced.append(index)
                delivery.release(partitions: [index])
                store.release(index, keepAsStandby: false)
            },
            rewriteRetryLine: { delivery.rewrite(line: $0) }, releaseTicket: { tickets.release($0) })
    }

    /// Partitions this replica found another owner had taken (``OwnershipFence``), in order.
    let fencedPartitions = FencedList()
    var fenced: [Int32] { fencedPartitions.values }

    /// Runs the store and the delivery service, and takes every partition in `owned` over.
    func start(owning owned: [Int32] = Array(0..<GatewayHarness.partitions)) async throws {
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: store), .init(service: delivery)], logger: logger))
        let task = Task { try await group.run() }
        running.withLock { $0 = (group, task) }
        _ = await store.waitForPartitionCount()
        for partition in owned { try await own(partition) }
    }

    /// Takes partition `index` over: loads it, promotes it, adopts what its previous owner left.
    func own(_ index: Int32) async throws {
        let loaded = await store.load(index)
        let state = try XCTUnwrap(loaded)
        delivery.adopt(try XCTUnwrap(state.promote()))
    }

    /// Gives partition `index` up (as a rebalance would after the records in flight finished).
    func giveUp(_ index: Int32) {
        store.partition(index)?.setRole(.releasing)
        delivery.release(partitions: [index])
        _ = store.partition(index)?.waitForWrites(timeout: .seconds(5))
        store.release(index, keepAsStandby: false)
    }

    func stop() async {
        guard let (group, task) = running.withLock({ $0 }) else { return }
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }

    func partition(ofApp app: String) throws -> PartitionState {
        try XCTUnwrap(store.ownedPartition(ofApp: app), "app \(app) is not owned")
    }

    var finished: [Int64] { finishedOffsets.values }

    /// Matches one event as the consumer would (its ticket released when its work is done); `fetchedAt`: when the
    /// consumer's poll returned it (``Uptime``; 0: unknown).
    @discardableResult
    func process(
        _ event: ChangeEvent, offset: Int64, now: Int64 = Int64(Date().timeIntervalSince1970), fetchedAt: UInt64 = 0
    ) throws -> EventOutcome {
        let profile = try XCTUnwrap(profiles.profile(event.app))
        let ticket = tickets.open(partition: store.partitionIndex(ofApp: event.app), offset: offset)
        defer { tickets.release(ticket) }
        return try partition(ofApp: event.app).process(
            event, offset: offset, profile: profile, now: now, eventTime: nil, fetchedAt: fetchedAt, ticket: ticket,
            tickets: tickets, delivery: delivery, payloads: payloads)
    }

    /// The API service over this harness.
    var service: SubscriptionService {
        SubscriptionService(store: store, profiles: profiles, snapshots: nil, metrics: metrics, logger: logger)
    }

    func router() -> Router<GatewayRequestContext> {
        Routes.router(
            subscriptions: service, v2: service, probe: Probe(health: Health(), store: store, metrics: metrics))
    }

    /// Every subscription of `app` held here.
    func subscriptions(_ app: String) -> [Subscription] {
        (try? partition(ofApp: app).withContents { $0.existingApp(app)?.index.allSubscriptions() ?? [] }) ?? []
    }

    /// Waits until `condition` holds (bounded).
    func eventually(
        timeout: Duration = .seconds(10), _ what: String, file: StaticString = #filePath, line: UInt = #line,
        _ condition: () -> Bool
    ) async {
        await waitUntil(timeout: timeout, what, file: file, line: line, condition)
    }
}

final class FencedList: Sendable {
    private let list = Mutex<[Int32]>([])
    func append(_ partition: Int32) { list.withLock { $0.append(partition) } }
    var values: [Int32] { list.withLock { $0 } }
}

final class OffsetList: Sendable {
    private let list = Mutex<[Int64]>([])
    func append(_ offset: Int64) { list.withLock { $0.append(offset) } }
    var values: [Int64] { list.withLock { $0 } }
}

/// Polls `condition` every 5 ms until it holds; fails the test after `timeout`.
func waitUntil(
    timeout: Duration = .seconds(10), _ what: String, file: StaticString = #filePath, line: UInt = #line,
    _ condition: () async -> Bool
) async {
    let deadline = ContinuousClock.now + timeout
    while !(await condition()) {
        if ContinuousClock.now > deadline { return XCTFail("timed out waiting for \(what)", file: file, line: line) }
        try? await Task.sleep(for: .milliseconds(5))
    }
}
