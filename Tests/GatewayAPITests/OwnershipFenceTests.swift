import GatewayTesting
import GatewayCore
import CompactJSON
import Foundation
import GatewayAPI
import KafkaClient
import PushCore
import Synchronization
import XCTest

@testable import Gateway

/// Zombie owners (issue 17): the state topic decides who owns a partition (``OwnershipFence``). Over the in-memory
/// log, a record another owner writes is exactly what a replica that took the partition over while this one was
/// frozen would write.
final class OwnershipFenceTests: XCTestCase {
    static let app = "chat"

    func harness(
        log: InMemoryLog? = nil, owning: [Int32] = Array(0..<GatewayHarness.partitions), verifier: (any LogReader)? = nil
    ) async throws -> GatewayHarness {
        let harness = try GatewayHarness(apps: [Self.app: AppSettings()], log: log, verifier: verifier)
        try await harness.start(owning: owning)
        addTeardownBlock { await harness.stop() }
        return harness
    }

    func subscribe(_ harness: GatewayHarness, device: String, path: String = "/x") async throws {
        try await harness.service.subscribe(
            V1SubscribeRequest(app: Self.app, path: try DataPath(path), deviceID: device, mode: .noData, authToken: nil))
    }

    /// Writes what a newer owner writes first: its load marker, tagged with its own tag.
    func takeOver(_ harness: GatewayHarness, tag: [UInt8] = [9, 9, 9, 9, 9, 9, 9, 9]) {
        let index = harness.store.partitionIndex(ofApp: Self.app)
        _ = harness.log.produce(
            KafkaRecord(
                topic: GatewayHarness.stateTopic, partition: index, key: OwnerTag.loadMarkerKey, value: [],
                headers: [KafkaHeader(name: OwnerTag.header, value: tag)]),
            completion: { _ in })
    }

    /// A write the broker stored but reported failed (a timeout): its offset is a gap before the next write.
    func leaveAGap(_ harness: GatewayHarness) async throws {
        harness.log.setLosingAcknowledgements(true)
        defer { harness.log.setLosingAcknowledgements(false) }
        do {
            try await subscribe(harness, device: "lost")
            XCTFail("a failed write was acknowledged")
        } catch let error as APIError {
            // Sent and not confirmed: it may have been stored, so its outcome is unknown (504), not "failed" (503).
            XCTAssertEqual(error.status, .gatewayTimeout, "\(error)")
            XCTAssertFalse(error.notOwner)
        }
    }

    func devices(_ harness: GatewayHarness) -> Set<String> {
        Set(harness.subscriptions(Self.app).map(\.subscriber.token))
    }

    func records(_ log: InMemoryLog, partition: Int32) -> [KafkaRecord] { log.records(GatewayHarness.stateTopic, partition: partition) }

    // MARK: Writes

    func testAWriteAfterANewerOwnersMarkerIsRefusedAndNeverApplied() async throws {
        let a = try await harness()
        let index = a.store.partitionIndex(ofApp: Self.app)
        try await subscribe(a, device: "before")
        takeOver(a)
        do {
            try await subscribe(a, device: "zombie")
            XCTFail("a write after another owner's marker was acknowledged")
        } catch let error as APIError {
            XCTAssertTrue(error.notOwner, "\(error)")
            XCTAssertEqual(error.status, .serviceUnavailable)
        }
        XCTAssertEqual(a.fenced, [index])
        XCTAssertNil(a.store.ownedPartition(ofApp: Self.app), "nothing of the partition is served any more")
        XCTAssertEqual(a.metrics.text().contains("pushgateway_ownership_fenced_total 1"), true)

        // The zombie's record is in the log, after the newer owner's marker: whoever loads the partition skips it,
        // and rewrites its key from memory (here: a tombstone), so that compaction cannot bring it back.
        let b = try await harness(log: a.log, owning: [index])
        XCTAssertEqual(devices(b), ["before"])
        await b.eventually("the superseded key rewritten") {
            records(b.log, partition: index).last.map { String(decoding: $0.key ?? [], as: UTF8.self).contains("zombie") && $0.value.isEmpty }
                ?? false
        }
        XCTAssertTrue(b.metrics.text().contains("pushgateway_state_records_superseded_total 1"))
    }

    func testAGapOfTheOwnersOwnRecordsIsCheckedAndClear() async throws {
        let a = try await harness()
        try await subscribe(a, device: "one")
        try await leaveAGap(a)
        try await subscribe(a, device: "two")
        XCTAssertTrue(a.fenced.isEmpty)
        await a.eventually("the repair of the failed write applied") { devices(a) == ["one", "two"] }
        XCTAssertNotNil(a.store.ownedPartition(ofApp: Self.app))
    }

    /// The write a frozen owner had sent just before it stopped: stored, its answer lost while the process was
    /// stopped; the retry librdkafka makes after the freeze is refused because the broker fenced the producer meanwhile
    /// (`PRODUCER_FENCED`), and librdkafka keeps the record's status "possibly persisted". A newer owner may have
    /// loaded it, so it is answered 504 (outcome unknown), never 503 nor "not owner" (a forwarding replica would send it
    /// to the new owner, which would answer from the record it loaded: a create answered 409, test_zombie.py).
    func testAWriteStoredThenRefusedOnItsRetryIsAnsweredMaybeStored() async throws {
        let a = try await harness()
        let index = a.store.partitionIndex(ofApp: Self.app)
        let refusedOnRetry = KafkaError(code: 90, message: "delivery: Broker: producer fenced", possiblyPersisted: true)
        a.log.holdAcknowledgements()
        a.log.setLosingAcknowledgements(true, error: refusedOnRetry)
        let service = a.service
        let request = V1SubscribeRequest(
            app: Self.app, path: try DataPath("/x"), deviceID: "sent-before-the-freeze", mode: .noData, authToken: nil)
        let write = Task { () -> APIError? in
            do {
                try await service.subscribe(request)
                return nil
            } catch let error as APIError {
                return error
            } catch {
                return APIError.internalError("\(error)")
            }
        }
        await a.eventually("the write stored") { records(a.log, partition: index).contains { String(decoding: $0.key ?? [], as: UTF8.self).contains("sent-before") } }
        takeOver(a)  // the newer owner's marker, after the stored write: it loads the write
        a.log.setLosingAcknowledgements(false)
        a.log.releaseAcknowledgements()
        let error = await write.value
        XCTAssertEqual(error?.status, .gatewayTimeout, "\(String(describing: error))")
        XCTAssertEqual(error?.notOwner, false, "not sent on to the new owner")

        let b = try await harness(log: a.log, owning: [index])
        XCTAssertEqual(devices(b), ["sent-before-the-freeze"], "the newer owner has it: 503 would have been a lie")
    }

    func testRecordsOfAnEarlierOwnerAfterTheMarkerAreRewritten() async throws {
        let a = try await harness()
        let index = a.store.partitionIndex(ofApp: Self.app)
        try await subscribe(a, device: "kept")
        // B takes the partition over while A is "frozen": A's next write lands after B's marker.
        let b = try await harness(log: a.log, owning: [index])
        do {
            try await subscribe(a, device: "zombie")
            XCTFail("the old owner acknowledged a write after the new owner's marker")
        } catch let error as APIError {
            XCTAssertTrue(error.notOwner, "\(error)")
        }
        XCTAssertEqual(a.fenced, [index])
        // B's next write reveals the zombie record in its own gap: B rewrites its key from memory (a tombstone).
        try await subscribe(b, device: "fresh")
        let markers = records(b.log, partition: index).filter { $0.key == OwnerTag.loadMarkerKey }
        XCTAssertEqual(markers.count, 2)
        let bTag = markers.last?.header(OwnerTag.header)
        await b.eventually("the zombie key rewritten by the new owner") {
            records(b.log, partition: index).contains {
                String(decoding: $0.key ?? [], as: UTF8.self).contains("zombie") && $0.value.isEmpty && $0.header(OwnerTag.header) == bTag
            }
        }
        XCTAssertEqual(devices(b), ["kept", "fresh"])
        // A third owner loading from the log has what B has.
        let c = try await harness(log: a.log, owning: [index])
        XCTAssertEqual(devices(c), ["kept", "fresh"])
    }

    func testLoadingAnOwnedPartitionAgainDoesNotSupersedeItself() async throws {
        // The group may assign a partition this replica already owns (a broker's new generation): it is loaded again,
        // with a new marker, while writes of the first ownership are in flight.
        let a = try await harness()
        let index = a.store.partitionIndex(ofApp: Self.app)
        try await subscribe(a, device: "one")
        a.log.holdAcknowledgements()
        let service = a.service
        let request = V1SubscribeRequest(app: Self.app, path: try DataPath("/x"), deviceID: "two", mode: .noData, authToken: nil)
        let inFlight = Task { [service, request] in try await service.subscribe(request) }
        try await Task.sleep(for: .milliseconds(50))
        let reload = Task { [a, index] in try await a.own(index) }
        try await Task.sleep(for: .milliseconds(50))
        a.log.releaseAcknowledgements()
        try await inFlight.value
        try await reload.value
        XCTAssertTrue(a.fenced.isEmpty, "superseded by its own marker")
        try await subscribe(a, device: "three")
        XCTAssertEqual(devices(a), ["one", "two", "three"])
        let b = try await harness(log: a.log, owning: [index])
        XCTAssertEqual(devices(b), ["one", "two", "three"])
    }

    /// Lost while loading and assigned again at once (issue 17, finding 11): whatever the interleaving, the
    /// partition ends loaded and owned, and the stale load ends without effect.
    func testAPartitionLostAndRegainedWhileLoadingEndsLoaded() async throws {
        let a = try await harness(owning: [])
        let index = a.store.partitionIndex(ofApp: Self.app)
        let store = a.store
        a.log.holdAcknowledgements()
        let first = Task { [store, index] in await store.load(index) }
        try await Task.sleep(for: .milliseconds(50))
        store.release(index, keepAsStandby: false)
        let second = Task { [store, index] in await store.load(index) }
        try await Task.sleep(for: .milliseconds(50))
        a.log.releaseAcknowledgements()
        let stale = await first.value
        let loaded = await second.value
        XCTAssertNil(stale, "a load given up meanwhile must end without a partition")
        let partition = try XCTUnwrap(loaded)
        XCTAssertNotNil(partition.promote())
        XCTAssertEqual(store.partition(index)?.role, .owner)
        try await subscribe(a, device: "after")
        XCTAssertEqual(devices(a), ["after"])
        // Released and loaded again, many times, quickly: always ends loaded.
        for _ in 0..<20 {
            store.release(index, keepAsStandby: false)
            let again = await store.load(index)
            XCTAssertNotNil(again?.promote())
        }
        try await subscribe(a, device: "last")
        XCTAssertEqual(devices(a), ["after", "last"])
    }

    /// An earlier owner's record of a subscription, found in the gap before this owner's own write of the same
    /// subscription (its create, just acknowledged to nobody yet): rewriting the key from memory must not undo the
    /// create (found by the nemesis run: a create answered 201, then lost).
    func testRewritingAnEarlierOwnersRecordNeverUndoesAWriteInFlight() async throws {
        let a = try await harness()
        let index = a.store.partitionIndex(ofApp: Self.app)
        try await subscribe(a, device: "one")
        // A late record of an earlier owner (tagged otherwise, no marker): the same subscription, created.
        let zombie = SubscriptionRecord(
            app: Self.app,
            subscription: Subscription(
                path: try DataPath("/x"), subscriber: SubscriberKey(kind: .mobile, token: "two"),
                settings: SubscriptionSettings(mode: .noData, format: .v1, expiresAt: Int64(Date().timeIntervalSince1970) + 3600)))
        _ = a.log.produce(
            KafkaRecord(
                topic: GatewayHarness.stateTopic, partition: index, key: StateRecord.subscription(zombie).key,
                value: StateRecord.subscription(zombie).value ?? [], headers: [KafkaHeader(name: OwnerTag.header, value: [1, 2, 3])]),
            completion: { _ in })
        try await subscribe(a, device: "two")  // lands after the zombie: the gap is read back, the key rewritten
        try await Task.sleep(for: .milliseconds(1500))  // the rewrite (rescheduled after the write) has run
        XCTAssertEqual(devices(a), ["one", "two"])
        let last = records(a.log, partition: index).last { String(decoding: $0.key ?? [], as: UTF8.self).contains("\"two\"") }
        XCTAssertEqual(last.map { !$0.value.isEmpty }, true, "the subscription's last record in the log is live")
        let b = try await harness(log: a.log, owning: [index])
        XCTAssertEqual(devices(b), ["one", "two"])
    }

    /// A key rewritten from memory while a write of it is in flight (a zombie's record found by another write's
    /// gap): the rewrite waits for the write, or it would land after it and undo it.
    func testARepairWaitsForAWriteInFlightOfTheSameSubscription() async throws {
        let a = try await harness()
        let index = a.store.partitionIndex(ofApp: Self.app)
        let partition = try a.partition(ofApp: Self.app)
        a.log.holdAcknowledgements()
        let service = a.service
        let request = V1SubscribeRequest(app: Self.app, path: try DataPath("/x"), deviceID: "two", mode: .noData, authToken: nil)
        let create = Task { [service, request] in try await service.subscribe(request) }
        try await Task.sleep(for: .milliseconds(50))
        let key = RetryKey(app: Self.app, path: try DataPath("/x"), subscriber: SubscriberKey(kind: .mobile, token: "two"))
        partition.scheduleRepair(key, delay: 0)
        try await Task.sleep(for: .milliseconds(100))
        a.log.releaseAcknowledgements()
        try await create.value
        try await Task.sleep(for: .milliseconds(800))
        XCTAssertEqual(devices(a), ["two"], "the repair undid the create")
        let last = records(a.log, partition: index).last { String(decoding: $0.key ?? [], as: UTF8.self).contains("\"two\"") }
        XCTAssertEqual(last.map { !$0.value.isEmpty }, true)
    }

    // MARK: Reads and notifications

    func testAReadWithALapsedLeaseAsksTheLogFirst() async throws {
        let a = try await harness()
        try await subscribe(a, device: "one")
        let partition = try a.partition(ofApp: Self.app)
        let value = try await partition.read { _ in 1 }
        XCTAssertEqual(value, 1)
        takeOver(a)
        try await Task.sleep(for: .milliseconds(1100))  // the lease (1 s) lapses
        XCTAssertFalse(partition.ownershipIsCurrent)
        do {
            _ = try await partition.read { _ in 1 }
            XCTFail("a read answered after another owner took the partition")
        } catch {
            XCTAssertTrue(error.notOwner)
        }
    }

    func testNoNotificationIsSentOnceAnotherOwnerTookThePartition() async throws {
        let a = try await harness()
        try await subscribe(a, device: "d")
        takeOver(a)
        try await Task.sleep(for: .milliseconds(1100))
        let event = ChangeEvent(app: Self.app, path: try DataPath("/x"), operation: .set, after: try JSONParser.parse("1"))
        try a.process(event, offset: 1)
        await a.eventually("the partition given up") { !a.fenced.isEmpty }
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertTrue(a.sender.sent(to: "d").isEmpty, "a superseded owner sent a notification")
        XCTAssertTrue(a.finished.isEmpty, "the event's offset must not move: the new owner consumes it again")
    }

    // MARK: Locks

    /// A rebalance (give up, take over), events and metrics reads, together, many times: nothing waits for ever
    /// (the lock order of docs/ARCHITECTURE.md).
    func testRebalanceEventsAndMetricsReadsTogetherNeverDeadlock() async throws {
        let a = try await harness()
        let index = a.store.partitionIndex(ofApp: Self.app)
        for device in 0..<20 { try await subscribe(a, device: "d\(device)", path: "/p1") }
        // Sends held: the delivery queue keeps lines, so giving the partition up walks them under its lock.
        a.sender.hold()
        defer { a.sender.release() }
        let stop = Box()
        let done = DispatchGroup()
        let iterations = Box()
        func spin(_ name: String, _ body: @escaping @Sendable () -> Void) {
            done.enter()
            let thread = Thread {
                while stop.value.load(ordering: .relaxed) == 0 { body() }
                done.leave()
            }
            thread.name = name
            thread.start()
        }
        let event = ChangeEvent(app: Self.app, path: try DataPath("/p1"), operation: .set, after: try JSONParser.parse("2"))
        let profile = try XCTUnwrap(a.profiles.profile(Self.app))
        for name in ["events", "events-2"] { spin(name) {
            guard let partition = a.store.ownedPartition(ofApp: Self.app) else { return }
            let ticket = a.tickets.open(partition: index, offset: 7)
            _ = partition.process(
                event, offset: 7, profile: profile, now: Int64(Date().timeIntervalSince1970), eventTime: nil, ticket: ticket,
                tickets: a.tickets, delivery: a.delivery, payloads: a.payloads)
            a.tickets.release(ticket)
        } }
        spin("metrics") {
            _ = a.store.counts()
            _ = a.store.held
            a.metrics.setPartitions(held: a.store.held, owned: [index], ready: [index])
            _ = a.delivery.status(app: Self.app, now: 0)
        }
        spin("metrics-2") { _ = a.store.held }
        // Another partition changes hands over and over; each revocation walks the delivery lines.
        let other = (index + 1) % GatewayHarness.partitions
        spin("rebalance") {
            a.giveUp(other)
            let owned = DispatchSemaphore(value: 0)
            Task {
                try? await a.own(other)
                owned.signal()
            }
            _ = owned.wait(timeout: .now() + 10)
            iterations.value.add(1, ordering: .relaxed)
        }
        spin("revocations") { a.delivery.release(partitions: [other]) }
        let deadline = ContinuousClock.now + .seconds(20)
        while iterations.value.load(ordering: .relaxed) < 300, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        stop.value.store(1, ordering: .relaxed)
        let finished = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: done.wait(timeout: .now() + 15) == .success) }
        }
        XCTAssertTrue(finished, "a thread is stuck: a lock-order cycle")
        XCTAssertGreaterThanOrEqual(iterations.value.load(ordering: .relaxed), 20, "the rebalances made too little progress")
    }

    // MARK: Shutdown

    /// A state log that cannot be read back (the broker is away for the verifier): a gap stays unread, its read
    /// tried again every second (for up to a minute).
    final class UnreadableLog: LogReader {
        let attempts = Atomic<Int>(0)
        func poll(timeoutMs: Int32) -> KafkaConsumer.PollResult { .none }
        func addAssignment(_ offsets: [TopicPartition: Int64]) throws {
            attempts.add(1, ordering: .relaxed)
            throw KafkaError(message: "the log cannot be read")
        }
        func removeAssignment(_ partitions: [TopicPartition]) throws {}
        func partitionCount(topic: String, timeoutMs: Int32) throws -> Int32 { GatewayHarness.partitions }
        func close() {}
    }

    /// The gateway's timers stop (the lifecycle, just before the producer closes) while a gap is still unread: its
    /// next read, a second away, runs at once as stopped, and the write behind the gap is answered "maybe stored"
    /// (504) then, not after the read's attempts.
    func testAGapStillUnreadWhenTheTimersStopAnswersItsWriteMaybeStoredAtOnce() async throws {
        let reader = UnreadableLog()
        let a = try await harness(verifier: reader)
        try await subscribe(a, device: "one")
        try await leaveAGap(a)
        let answer = Mutex<APIError?>(nil)
        let answered = Atomic<Bool>(false)
        let request = V1SubscribeRequest(app: Self.app, path: try DataPath("/x"), deviceID: "two", mode: .noData, authToken: nil)
        Task {
            do {
                try await a.service.subscribe(request)
            } catch let error as APIError {
                answer.withLock { $0 = error }
            } catch {}
            answered.store(true, ordering: .releasing)
        }
        await waitUntil("the gap read failed") { reader.attempts.load(ordering: .relaxed) >= 1 }
        XCTAssertFalse(answered.load(ordering: .acquiring), "the write waits for its gap")

        await a.log.timers.shutdown()
        await waitUntil("the write behind the gap answered") { answered.load(ordering: .acquiring) }
        XCTAssertEqual(answer.withLock { $0?.status }, .gatewayTimeout, "maybe stored: the next owner reads the log")
        XCTAssertEqual(a.log.timers.pendingCount, 0, "nothing left to fire")
    }
}

/// A shared counter or flag for test threads.
final class Box: Sendable {
    let value = Atomic<Int>(0)
}
