import GatewayTesting
import Foundation
import GatewayAPI
import Providers
import PushCore
import XCTest

@testable import Gateway

/// The delivery order, revocations, retries and ownership changes, over an in-memory state log and a fake
/// sender (issue 14): the same code the gateway runs, without Kafka.
final class DeliveryOrderTests: XCTestCase {
    static let app = "chat"

    func harness(
        apps: [String: AppSettings] = [app: AppSettings()], log: InMemoryLog? = nil, sender: FakeSender = FakeSender(),
        owning: [Int32] = Array(0..<GatewayHarness.partitions)
    ) async throws -> GatewayHarness {
        let harness = try GatewayHarness(apps: apps, log: log, sender: sender)
        try await harness.start(owning: owning)
        addTeardownBlock { await harness.stop() }
        return harness
    }

    func subscribe(_ harness: GatewayHarness, device: String, path: String = "/x", mode: SubscriptionMode = .value) async throws {
        try await harness.service.subscribe(
            V1SubscribeRequest(app: Self.app, path: try DataPath(path), deviceID: device, mode: mode, authToken: nil))
    }

    func set(_ path: String, _ value: String) throws -> ChangeEvent {
        ChangeEvent(app: Self.app, path: try DataPath(path), operation: .set, after: try JSONParser.parse(value))
    }

    /// The `d` (value) or `r` (revoke reason) of each v1 payload delivered to `device`.
    func delivered(_ harness: GatewayHarness, to device: String) -> [String] {
        harness.sender.sent(to: device).map { payload in
            guard let data = try? JSONParser.parse(payload) else { return "?" }
            if data["t"] == .string("revoke") { return "revoke:" + (data["r"]?.stringValue ?? "") }
            return data["d"]?.stringValue ?? data["t"]?.stringValue ?? "?"
        }
    }

    /// State records of `app` written to the log (key, and whether it was a tombstone).
    func stateRecords(_ harness: GatewayHarness) -> [(key: String, value: String?)] {
        let partition = harness.store.partitionIndex(ofApp: Self.app)
        return harness.log.records(GatewayHarness.stateTopic, partition: partition).map {
            (String(decoding: $0.key ?? [], as: UTF8.self), $0.value.isEmpty ? nil : String(decoding: $0.value, as: UTF8.self))
        }
    }

    // MARK: Order

    func testNotificationsOfASubscriptionLeaveInEventOrder() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "d1")
        harness.sender.hold()
        for (offset, value) in ["1", "2", "3"].enumerated() { try harness.process(try set("/x", value), offset: Int64(offset)) }
        XCTAssertTrue(harness.sender.sent.isEmpty)
        XCTAssertTrue(harness.finished.isEmpty, "no offset moves before its notifications are answered")
        harness.sender.release()
        await harness.eventually("three deliveries") { harness.sender.sent(to: "d1").count == 3 }
        XCTAssertEqual(delivered(harness, to: "d1"), ["1", "2", "3"])
        await harness.eventually("offsets finished") { harness.finished.count == 3 }
    }

    // MARK: Revocation

    /// The revoke is the last message: notifications decided before the revocation point go first, nothing
    /// is matched after it, and the tombstone follows the delivered revoke.
    func testRevokeIsTheLastMessageAndNothingMatchesAfterTheRevocationPoint() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "d1")
        try await subscribe(harness, device: "d2")
        harness.sender.hold()
        try harness.process(try set("/x", "1"), offset: 0)
        try harness.process(try set("/x", "2"), offset: 1)
        let partition = try harness.partition(ofApp: Self.app)
        let (counts, after) = partition.revoke(app: Self.app, delivery: harness.delivery, now: 0) { app in
            [(.permissionDenied, app.index.allSubscriptions().filter { $0.subscriber.token == "d1" })]
        }
        XCTAssertEqual(counts.map(\.1), [1])
        XCTAssertEqual(after, 1, "the revocation point comes after the last event matched")
        try harness.process(try set("/x", "3"), offset: 2)
        harness.sender.release()
        await harness.eventually("d1's revoke and d2's three values") {
            harness.sender.sent(to: "d1").count == 3 && harness.sender.sent(to: "d2").count == 3
        }
        XCTAssertEqual(delivered(harness, to: "d1"), ["1", "2", "revoke:permission_denied"])
        XCTAssertEqual(delivered(harness, to: "d2"), ["1", "2", "3"])
        // Marker, then (once the revoke was delivered) the tombstone.
        await harness.eventually("the tombstone") {
            stateRecords(harness).contains { $0.key.contains("\"d1\"") && $0.value == nil }
        }
        let d1 = stateRecords(harness).filter { $0.key.contains("\"d1\"") && !$0.key.hasPrefix("[\"retry\"") }
        XCTAssertTrue(d1.contains { $0.value?.contains("\"revoked\":\"permission_denied\"") ?? false })
        XCTAssertNil(d1.last?.value)
        XCTAssertEqual(harness.subscriptions(Self.app).map(\.subscriber.token), ["d2"])
    }

    /// An expiry takes effect at an exact point too: before the app's next event is matched, not silently until
    /// the next sweep. Events before it are delivered, then the revoke; the event after it reaches nobody.
    func testExpiryIsRevokedBeforeTheNextEventIsMatched() async throws {
        var settings = AppSettings()
        settings.subscriptionTTLSeconds = 1  // (the revoke is queued at the event's time: 1 s ahead at most)
        let harness = try await harness(apps: [Self.app: settings])
        try await subscribe(harness, device: "d1")
        let now = Int64(Date().timeIntervalSince1970)
        let first = try harness.process(try set("/x", "1"), offset: 0, now: now)
        XCTAssertEqual(first.expired, 0)
        let expiresAt = try XCTUnwrap(harness.subscriptions(Self.app).first?.settings.expiresAt)
        let second = try harness.process(try set("/x", "2"), offset: 1, now: expiresAt)
        XCTAssertEqual(second.expired, 1)
        XCTAssertEqual(second.afterOffset, 0, "the point is after the last event matched")
        XCTAssertEqual(second.notifications, 0)
        await harness.eventually("the value, then the revoke") { harness.sender.sent(to: "d1").count == 2 }
        XCTAssertEqual(delivered(harness, to: "d1"), ["1", "revoke:expired"])
        XCTAssertTrue(harness.subscriptions(Self.app).isEmpty)
        await harness.eventually("offsets finished") { Set(harness.finished) == [0, 1] }
        await harness.eventually("the tombstone") {
            stateRecords(harness).last { $0.key.contains("\"d1\"") && !$0.key.hasPrefix("[\"retry\"") }?.value == nil
        }
    }

    /// A write produced before the revocation point (acknowledged after it) never brings the subscription back.
    func testAWriteFromBeforeTheRevocationDoesNotBringItBack() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "d1")
        harness.log.holdAcknowledgements()
        let refresh = Self.background(harness.service, V1SubscribeRequest(app: Self.app, path: try DataPath("/x"), deviceID: "d1", mode: .noData, authToken: nil))
        await harness.eventually("the refresh produced") {
            stateRecords(harness).filter { $0.key.contains("\"d1\"") }.count == 2
        }
        let partition = try harness.partition(ofApp: Self.app)
        _ = partition.revoke(app: Self.app, delivery: harness.delivery, now: 0) { app in
            [(.disabled, app.index.allSubscriptions())]
        }
        harness.log.releaseAcknowledgements()
        try await refresh.value  // stored: answered as such
        await harness.eventually("the revoke") { harness.sender.sent(to: "d1").count == 1 }
        XCTAssertEqual(delivered(harness, to: "d1"), ["revoke:disabled"])
        XCTAssertTrue(harness.subscriptions(Self.app).isEmpty)
        try harness.process(try set("/x", "\"after\""), offset: 0)
        await harness.eventually("the offset") { harness.finished == [0] }
        XCTAssertEqual(harness.sender.sent(to: "d1").count, 1)
    }

    static func background(_ service: SubscriptionService, _ request: V1SubscribeRequest) -> Task<Void, any Error> {
        Task { try await service.subscribe(request) }
    }

    // MARK: Retries

    /// A failing subscription backs off, its line is stored (so the events' offsets move), later data is
    /// coalesced behind it, and its revoke waits for it.
    func testRetriesKeepTheirPlaceAndTheRevokeWaitsForThem() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "d1")
        let unavailable = DeliveryOutcome.failed(DeliveryFailure(reason: "UNAVAILABLE", classification: .retryable))
        harness.sender.script("d1", [unavailable, unavailable, unavailable])
        try harness.process(try set("/x", "1"), offset: 0)
        await harness.eventually("the first failure") { harness.sender.attempts(to: "d1") >= 1 }
        try harness.process(try set("/x", "2"), offset: 1)
        let partition = try harness.partition(ofApp: Self.app)
        _ = partition.revoke(app: Self.app, delivery: harness.delivery, now: 0) { app in
            [(.expired, app.index.allSubscriptions())]
        }
        await harness.eventually("the value and the revoke") { harness.sender.sent(to: "d1").count == 2 }
        // Value 2 coalesced the failed value 1 (the subscription was backing off); the revoke came last.
        XCTAssertEqual(delivered(harness, to: "d1"), ["2", "revoke:expired"])
        XCTAssertEqual(harness.sender.attempts(to: "d1"), 5)
        await harness.eventually("offsets finished") { Set(harness.finished) == [0, 1] }
        let retries = stateRecords(harness).filter { $0.key.hasPrefix("[\"retry\"") }
        XCTAssertTrue(retries.contains { $0.value != nil }, "the backing-off line was stored")
        await harness.eventually("the line's tombstone") {
            stateRecords(harness).filter { $0.key.hasPrefix("[\"retry\"") }.last?.value == nil
        }
    }

    /// A user notification queued for subscription d1 at /x (as ``PartitionMachine/notifyUser`` queues one).
    func userNotification(ttl: Int?, key: String?, eventID: String) throws -> PendingNotification {
        var pending = PendingNotification(
            app: Self.app, path: try DataPath("/x"), subscriber: SubscriberKey(kind: .mobile, token: "d1"), format: .v1,
            content: .user(UserMessage(data: .object([:]), eventID: eventID, collapseKey: key, ttlSeconds: ttl)),
            scope: Self.app, origin: eventID, firstFailureAt: Date().timeIntervalSince1970)
        pending.payload = Array(eventID.utf8)
        return pending
    }

    func testUserNotificationsCarryTheirTTLAndCollapseKeyAndExpireBetweenRetries() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "d1")
        let unavailable = DeliveryOutcome.failed(DeliveryFailure(reason: "UNAVAILABLE", classification: .retryable))
        // TTL 0: one attempt; it fails, so the retry is dropped (expired), and the line moves on to the next one,
        // which fails once and is retried with what is left of its TTL.
        harness.sender.script("d1", [unavailable, unavailable])
        harness.delivery.enqueue([
            try userNotification(ttl: 0, key: "k", eventID: "once"), try userNotification(ttl: 3600, key: "7", eventID: "later"),
        ])
        await harness.eventually("the second one delivered") { harness.sender.sent(to: "d1") == ["later"] }
        let attempts = harness.sender.attemptsMade(to: "d1")
        XCTAssertEqual(attempts.map(\.payload), ["once", "later", "later"])
        XCTAssertEqual(attempts[0].options, DeliveryOptions(ttlSeconds: 0, collapseKey: "k"))
        XCTAssertEqual(attempts[1].options, DeliveryOptions(ttlSeconds: 3600, collapseKey: "7"))
        XCTAssertEqual(attempts[2].options.collapseKey, "7")
        XCTAssertTrue((3598...3599).contains(attempts[2].options.ttlSeconds ?? 0), "\(attempts[2].options)")
        XCTAssertTrue(harness.metrics.text().contains(#"pushgateway_retries_finished_total{outcome="expired"} 1"#))
        // A change event to the same device: no options.
        try harness.process(try set("/x", "1"), offset: 0)
        await harness.eventually("the value") { harness.sender.sent(to: "d1").count == 2 }
        XCTAssertEqual(harness.sender.attemptsMade(to: "d1").last?.options, DeliveryOptions.none)
    }

    func testDeadTokenDeletesTheSubscriptionWithoutARevoke() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "d1")
        harness.sender.script("d1", [.failed(DeliveryFailure(reason: "UNREGISTERED", classification: .tokenDead))])
        try harness.process(try set("/x", "1"), offset: 0)
        await harness.eventually("the deletion") { harness.subscriptions(Self.app).isEmpty }
        await harness.eventually("the tombstone") { stateRecords(harness).last?.value == nil }
        XCTAssertTrue(harness.sender.sent(to: "d1").isEmpty)
        await harness.eventually("the offset") { harness.finished == [0] }
    }

    // MARK: API decisions

    func testTwoCreatesOfOneSubscriptionGiveCreatedAndConflict() async throws {
        var settings = AppSettings()
        settings.authKeys = [.object(["alg": .string("HS256"), "secret": .string(V2RoutesTests.secret)])]
        let harness = try await harness(apps: [Self.app: settings])
        let request = V2SubscriptionRequest(
            kind: .mobile, mode: .noData, path: try DataPath("/p"), context: "t1", expirationTimestampSeconds: nil, format: .v2)
        let token = V2RoutesTests.token(uid: "u")
        harness.log.holdAcknowledgements()
        let service = harness.service
        @Sendable func create() async -> Result<V2WriteOutcome, APIError> {
            do throws(APIError) {
                return .success(try await service.create(try await service.authorize(app: Self.app, uid: "u", bearer: token), request: request, allowsUpdate: false))
            } catch {
                return .failure(error)
            }
        }
        async let first = create()
        async let second = create()
        try await Task.sleep(for: .milliseconds(50))
        harness.log.releaseAcknowledgements()
        let outcomes = await [first, second]
        let created = outcomes.filter { if case .success(.created) = $0 { return true } else { return false } }
        let conflicts = outcomes.filter { if case .failure(let error) = $0 { return error.status == .conflict } else { return false } }
        XCTAssertEqual(created.count, 1)
        XCTAssertEqual(conflicts.count, 1)
        // Read your write: at once.
        let listed = try await service.list(try await service.authorize(app: Self.app, uid: "u", bearer: token))
        XCTAssertEqual(listed.map(\.context), ["t1"])
    }

    /// Concurrent creates cannot pass a quota together: writes in flight count.
    func testConcurrentCreatesRespectTheQuota() async throws {
        var settings = AppSettings()
        settings.quotas.maxSubscriptionsPerDevice = 2
        let harness = try await harness(apps: [Self.app: settings])
        harness.log.holdAcknowledgements()
        let tasks = try (0..<3).map { index in
            Self.background(
                harness.service,
                V1SubscribeRequest(app: Self.app, path: try DataPath("/n\(index)"), deviceID: "d1", mode: .noData, authToken: nil))
        }
        try await Task.sleep(for: .milliseconds(50))
        harness.log.releaseAcknowledgements()
        var statuses: [Int] = []
        for task in tasks {
            do {
                try await task.value
                statuses.append(204)
            } catch let error as APIError {
                statuses.append(Int(error.status.code))
            }
        }
        XCTAssertEqual(statuses.sorted(), [204, 204, 429])
        XCTAssertEqual(harness.subscriptions(Self.app).count, 2)
    }

    func testCallsForAPartitionNotOwnedHereAreRefusedWithRetryAfter() async throws {
        let probe = try GatewayHarness(apps: [Self.app: AppSettings()])
        let index = probe.store.partitionIndex(ofApp: Self.app)
        let harness = try await harness(owning: Array(0..<GatewayHarness.partitions).filter { $0 != Int32(index) && index >= 0 })
        do {
            try await subscribe(harness, device: "d1")
            XCTFail("accepted a call for a partition not owned here")
        } catch let error as APIError {
            XCTAssertEqual(error.status, .serviceUnavailable)
            XCTAssertNotNil(error.retryAfterSeconds)
        }
    }

    // MARK: Ownership changes

    /// A replica that takes a partition over finds its subscriptions, the previous owner's pending retries,
    /// and the revokes it had not delivered; it delivers them in order and writes the tombstones.
    func testTakeoverAdoptsPendingRetriesAndUndeliveredRevokes() async throws {
        let first = try await harness()
        try await subscribe(first, device: "d1")
        try await subscribe(first, device: "d2")
        try await subscribe(first, device: "d3", path: "/y", mode: .noData)
        let unavailable = DeliveryOutcome.failed(DeliveryFailure(reason: "UNAVAILABLE", classification: .retryable))
        first.sender.script("d1", Array(repeating: unavailable, count: 1000))
        first.sender.script("d2", Array(repeating: unavailable, count: 1000))
        try first.process(try set("/x", "1"), offset: 0)
        await first.eventually("both lines stored") {
            stateRecords(first).filter { $0.key.hasPrefix("[\"retry\"") && $0.value != nil }.count >= 2
        }
        let partition = try first.partition(ofApp: Self.app)
        _ = partition.revoke(app: Self.app, delivery: first.delivery, now: 0) { app in
            [(.permissionDenied, app.index.allSubscriptions().filter { $0.subscriber.token == "d2" })]
        }
        await first.eventually("d2's line stored with its revoke") {
            stateRecords(first).last { $0.key.hasPrefix("[\"retry\"") && $0.key.contains("\"d2\"") }?.value?.contains("revoke") ?? false
        }
        let index = first.store.partitionIndex(ofApp: Self.app)
        first.giveUp(index)

        let second = try await harness(log: first.log, owning: [index])
        await second.eventually("d1's retry and d2's value and revoke") {
            second.sender.sent(to: "d1").count == 1 && second.sender.sent(to: "d2").count == 2
        }
        XCTAssertEqual(delivered(second, to: "d1"), ["1"])
        XCTAssertEqual(delivered(second, to: "d2"), ["1", "revoke:permission_denied"])
        XCTAssertEqual(Set(second.subscriptions(Self.app).map(\.subscriber.token)), ["d1", "d3"])
        await second.eventually("d2's tombstone") {
            stateRecords(second).last { $0.key.contains("\"d2\"") && !$0.key.hasPrefix("[\"retry\"") }?.value == nil
        }
        // Events now go to the new owner only.
        try second.process(try set("/y", "2"), offset: 1)
        await second.eventually("d3 notified by the new owner") { second.sender.sent(to: "d3").count == 1 }
        XCTAssertTrue(first.sender.sent(to: "d3").isEmpty)
    }
}
