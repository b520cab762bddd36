import Foundation
import GatewayAPI
import Providers
import PushCore
import XCTest

@testable import Gateway

/// Delivery lanes (`delivery.lanes`): the harness runs ``GatewayHarness/lanes`` of them. A subscription's line is
/// always in one lane, and so is every notification of one provider project: order, per-project limits and the
/// replica-wide `maxInFlight` hold as with one queue; a send stuck in one lane holds no other lane's sends; release,
/// takeover and the app's status span the lanes.
extension DeliveryOrderTests {
    private var unavailable: DeliveryOutcome { .failed(DeliveryFailure(reason: "UNAVAILABLE", classification: .retryable)) }

    private func lane(_ scope: String) -> Int { DeliveryService.laneIndex(scope: scope, lanes: GatewayHarness.lanes) }

    private func settings(_ apps: [String]) -> [String: AppSettings] {
        Dictionary(uniqueKeysWithValues: apps.map { ($0, AppSettings()) })
    }

    private func subscribe(_ harness: GatewayHarness, app: String, device: String) async throws {
        try await harness.service.subscribe(
            V1SubscribeRequest(app: app, path: try DataPath("/x"), deviceID: device, mode: .value, authToken: nil))
    }

    private func set(app: String, _ value: String) throws -> ChangeEvent {
        ChangeEvent(app: app, path: try DataPath("/x"), operation: .set, after: try JSONParser.parse(value))
    }

    /// `app` sends its FCM devices' notifications through `sender`, with these limits.
    private func use(
        _ sender: FakeSender, for app: String, in harness: GatewayHarness, maxInFlightPerProject: Int = 200, maxSendsPerMinute: Int? = nil
    ) throws {
        let current = try XCTUnwrap(harness.profiles.profile(app))
        var settings = current.settings
        if let maxSendsPerMinute { settings.fcm.maxSendsPerMinute = maxSendsPerMinute }
        harness.profiles.set(
            app,
            AppProfile(
                name: app, settings: settings, verifier: nil, rules: current.rules, rulesFingerprint: current.rulesFingerprint,
                encryption: nil, senders: [.mobile: sender], fcmAccountFingerprint: nil, maxInFlightPerProject: maxInFlightPerProject))
    }

    /// Two of `apps` in different partitions whose own lanes differ too (so only their shared project puts their
    /// notifications in one lane).
    private func twoAppsApart(_ apps: [String], in harness: GatewayHarness) throws -> (String, String) {
        let pairs = apps.flatMap { one in apps.map { (one, $0) } }
        let pair = pairs.first { one, two in
            harness.store.partitionIndex(ofApp: one) != harness.store.partitionIndex(ofApp: two) && lane(one) != lane(two)
        }
        return try XCTUnwrap(pair, "two apps in different partitions and lanes")
    }

    /// Two apps in different partitions and lanes whose FCM devices' notifications go through `shared` (one
    /// project), with these limits, `each` notifications of each queued (to as many devices).
    private func twoAppsSharing(
        _ shared: FakeSender, each: Int, maxInFlightPerProject: Int = 200, maxSendsPerMinute: Int? = nil
    ) async throws -> (GatewayHarness, String, String) {
        let apps = (1...8).map { "app\($0)" }
        let harness = try await harness(apps: settings(apps))
        let (one, two) = try twoAppsApart(apps, in: harness)
        for app in [one, two] {
            try use(shared, for: app, in: harness, maxInFlightPerProject: maxInFlightPerProject, maxSendsPerMinute: maxSendsPerMinute)
            harness.delivery.enqueue(try (1...each).map { try queued(app, "\(app)-\($0)") })
        }
        return (harness, one, two)
    }

    func testLinesOfOneSubscriptionKeepTheirOrderWithSeveralLanes() async throws {
        try XCTSkipIf(GatewayHarness.lanes < 2, "one lane")
        let apps = (1...6).map { "app\($0)" }
        XCTAssertGreaterThan(Set(apps.map(lane)).count, 1, "the apps are spread over the lanes")
        let harness = try await harness(apps: settings(apps))
        XCTAssertEqual(harness.delivery.laneCount, GatewayHarness.lanes)
        for app in apps {
            for device in 1...3 { try await subscribe(harness, app: app, device: "\(app)-d\(device)") }
            // A failing head keeps its place: what follows waits behind its retries (value notifications behind a
            // backing-off head coalesce to the latest).
            harness.sender.script("\(app)-d2", [unavailable, unavailable])
        }
        var offset: Int64 = 0
        for value in 1...5 {
            for app in apps {
                try harness.process(try set(app: app, "\(value)"), offset: offset)
                offset += 1
            }
        }
        let devices = apps.flatMap { app in (1...3).map { "\(app)-d\($0)" } }
        await harness.eventually("every device has its last value") {
            devices.allSatisfy { delivered(harness, to: $0).last == "5" }
        }
        for device in devices {
            let values = delivered(harness, to: device)
            if device.hasSuffix("-d2") {
                XCTAssertEqual(values, values.sorted(), "\(device): in order, coalesced behind its retries")
                XCTAssertEqual(values.last, "5", device)
            } else {
                XCTAssertEqual(values, ["1", "2", "3", "4", "5"], device)
            }
        }
    }

    func testTheReplicaWideInFlightBoundHoldsOverTheLanes() async throws {
        try XCTSkipIf(GatewayHarness.lanes < 2, "one lane")
        let apps = (1...6).map { "app\($0)" }
        XCTAssertGreaterThan(Set(apps.map(lane)).count, 1, "the apps are spread over the lanes")
        let harness = try GatewayHarness(apps: settings(apps), maxInFlight: 2)
        try await harness.start()
        addTeardownBlock { await harness.stop() }
        harness.sender.hold()
        for app in apps { harness.delivery.enqueue(try ["\(app)-1", "\(app)-2"].map { try queued(app, $0) }) }
        for round in 1...6 {
            await harness.eventually("two sends in progress (round \(round))") { harness.sender.heldCount == 2 }
            harness.sender.release(keepHolding: true)
            await harness.eventually("round \(round) answered") { harness.sender.sent.count == round * 2 }
        }
        XCTAssertEqual(harness.sender.mostConcurrent, 2, "never more than maxInFlight in progress, over all lanes")
    }

    func testAppsOfTwoPartitionsSharingAnFCMProjectKeepItsInFlightLimit() async throws {
        try XCTSkipIf(GatewayHarness.lanes < 2, "one lane")
        let shared = FakeSender(provider: "fcm", project: "fcm:shared")
        shared.hold()
        let (harness, _, _) = try await twoAppsSharing(shared, each: 4, maxInFlightPerProject: 2)
        for round in 1...4 {
            await harness.eventually("the project's two places taken (round \(round))") { shared.heldCount == 2 }
            shared.release(keepHolding: true)
            await harness.eventually("round \(round) answered") { shared.sent.count == round * 2 }
        }
        XCTAssertEqual(shared.mostConcurrent, 2, "the project's limit counts both apps' requests")
    }

    func testAppsOfTwoPartitionsSharingAnFCMProjectShareItsPace() async throws {
        try XCTSkipIf(GatewayHarness.lanes < 2, "one lane")
        let shared = FakeSender(provider: "fcm", project: "fcm:shared")
        // One send a minute: a burst of one, the next token after a minute.
        let (harness, one, two) = try await twoAppsSharing(shared, each: 3, maxSendsPerMinute: 1)
        func waiting(_ app: String) -> Int { harness.delivery.pacing(app: app).first?.waiting ?? -1 }
        await harness.eventually("one send, five waiting for the project's pace") {
            shared.sent.count == 1 && waiting(one) == 5
        }
        XCTAssertEqual(waiting(two), 5, "one pace for the project, whichever app asks")
        XCTAssertEqual(harness.delivery.pacing(app: one).map(\.project), ["fcm:shared"])
    }

    func testASendStuckInOneLaneDoesNotHoldAnotherLanesSends() async throws {
        try XCTSkipIf(GatewayHarness.lanes < 2, "one lane")
        let projects = (0..<20).map { "fcm:p\($0)" }
        let stuckProject = try XCTUnwrap(projects.first)
        let freeProject = try XCTUnwrap(projects.first { lane($0) != lane(stuckProject) })
        let harness = try await harness(apps: settings(["stuck", "free"]))
        let stuck = FakeSender(provider: "fcm", project: stuckProject)
        let free = FakeSender(provider: "fcm", project: freeProject)
        try use(stuck, for: "stuck", in: harness)
        try use(free, for: "free", in: harness)
        stuck.hold()
        harness.delivery.enqueue(try ["s1", "s2", "s3"].map { try queued("stuck", $0) })
        await harness.eventually("stuck's three sends hang") { stuck.heldCount == 3 }
        harness.delivery.enqueue(try ["f1", "f2", "f3"].map { try queued("free", $0) })
        await harness.eventually("free's notifications delivered while stuck's sends hang") {
            free.sent.map(\.token).sorted() == ["f1", "f2", "f3"]  // three subscriptions: sent in parallel
        }
        XCTAssertEqual(harness.delivery.status(app: "stuck", now: Date().timeIntervalSince1970).queued, 3)
        stuck.release()
        await harness.eventually("stuck's notifications delivered") { stuck.sent.count == 3 }
    }

    /// A project's quota (`QUOTA_EXCEEDED`) pauses the project, in its lane: every app sending through it waits, and
    /// each app's status shows the pause; an app on another project goes on.
    func testAProjectsQuotaPausesEveryAppOfTheProjectAndNoOther() async throws {
        let shared = FakeSender(provider: "fcm", project: "fcm:shared")
        // With several lanes, the other project is in the shared project's lane: the pause, not the lane, holds
        // the shared project's notifications back.
        let otherProject = try XCTUnwrap((0..<20).map { "fcm:p\($0)" }.first { lane($0) == lane(shared.project) })
        let elsewhere = FakeSender(provider: "fcm", project: otherProject)
        let apps = (1...8).map { "app\($0)" }
        let harness = try await harness(apps: settings(apps + ["other"]))
        // With several lanes, two apps whose own lanes differ: only their project puts them in one lane.
        let (one, two) = GatewayHarness.lanes > 1 ? try twoAppsApart(apps, in: harness) : ("app1", "app2")
        for app in [one, two] { try use(shared, for: app, in: harness) }
        try use(elsewhere, for: "other", in: harness)
        let quota = DeliveryFailure(reason: "QUOTA_EXCEEDED", classification: .retryable, retryAfter: 30, projectQuota: true)
        shared.script("\(one)-1", [.failed(quota)])
        harness.delivery.enqueue([try queued(one, "\(one)-1")])
        let now = Date().timeIntervalSince1970
        await harness.eventually("the project paused by its quota") { harness.delivery.status(app: one, now: now).pausedUntil != nil }
        let pausedUntil = try XCTUnwrap(harness.delivery.status(app: one, now: now).pausedUntil)
        XCTAssertGreaterThan(pausedUntil, now + 20, "until the failed line's retry (Retry-After; the harness's deadline is 60 s)")
        XCTAssertEqual(harness.delivery.status(app: two, now: now).pausedUntil, pausedUntil, "the project's pause, shown for each of its apps")
        XCTAssertNil(harness.delivery.status(app: "other", now: now).pausedUntil, "another project is not paused")

        harness.delivery.enqueue([try queued(two, "\(two)-1")])
        harness.delivery.enqueue([try queued("other", "other-1")])
        await harness.eventually("the other project's notification delivered") { elsewhere.sent.map(\.token) == ["other-1"] }
        XCTAssertEqual(shared.attempts(to: "\(two)-1"), 0, "the paused project's other app waits")
        XCTAssertEqual(harness.delivery.status(app: two, now: now).queued, 1)
        XCTAssertEqual(shared.attempts(to: "\(one)-1"), 1, "the failed line waits for its retry")
    }

    func testReleaseTakeoverAndStatusSpanTheLanes() async throws {
        try XCTSkipIf(GatewayHarness.lanes < 2, "one lane")
        let apps = (1...12).map { "app\($0)" }
        let first = try await harness(apps: settings(apps))
        // Two apps of one partition in different lanes, and one of another partition.
        let pairs = apps.flatMap { one in apps.map { (one, $0) } }
        let (one, two) = try XCTUnwrap(pairs.first { one, two in
            first.store.partitionIndex(ofApp: one) == first.store.partitionIndex(ofApp: two) && lane(one) != lane(two)
        })
        let given = first.store.partitionIndex(ofApp: one)
        let other = try XCTUnwrap(apps.first { first.store.partitionIndex(ofApp: $0) != given })
        for app in [one, two, other] {
            try await subscribe(first, app: app, device: "\(app)-d")
            first.sender.script("\(app)-d", Array(repeating: unavailable, count: 1000))
        }
        for (offset, app) in [one, two, other].enumerated() { try first.process(try set(app: app, "1"), offset: Int64(offset)) }
        let now = Date().timeIntervalSince1970
        await first.eventually("each app's line backs off") {
            [one, two, other].allSatisfy { first.delivery.status(app: $0, now: now).retrying == 1 }
        }
        await first.eventually("the lines of the given partition stored") {
            first.log.records(GatewayHarness.stateTopic, partition: given).filter {
                String(decoding: $0.key ?? [], as: UTF8.self).hasPrefix("[\"retry\"") && !$0.value.isEmpty
            }.count >= 2
        }

        first.giveUp(given)
        XCTAssertEqual(first.delivery.status(app: one, now: now).queued, 0, "released in its lane")
        XCTAssertEqual(first.delivery.status(app: two, now: now).queued, 0, "released in its lane")
        XCTAssertEqual(first.delivery.status(app: other, now: now).queued, 1, "another partition's line stays")

        let second = try await harness(apps: settings(apps), log: first.log, owning: [given])
        await second.eventually("the adopted lines delivered by the new owner, each in its lane") {
            second.sender.sent(to: "\(one)-d").count == 1 && second.sender.sent(to: "\(two)-d").count == 1
        }
        XCTAssertEqual(delivered(second, to: "\(one)-d"), ["1"])
        XCTAssertEqual(delivered(second, to: "\(two)-d"), ["1"])
    }
}
