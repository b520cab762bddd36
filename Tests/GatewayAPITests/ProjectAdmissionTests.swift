import Foundation
import PushCore
import XCTest

@testable import Gateway

/// A provider project's in-flight limit (`fcm.maxInFlightPerProject`) is a delivery queue admission: a project at
/// its limit keeps its other notifications in the queue, in order, without the service's sending places, which the
/// other projects use meanwhile.
extension DeliveryOrderTests {
    /// A notification of `app` to the FCM device `token`, its payload ready (as a partition queues one).
    func queued(_ app: String, _ token: String) throws -> PendingNotification {
        var pending = PendingNotification(
            app: app, path: try DataPath("/x"), subscriber: SubscriberKey(kind: .mobile, token: token), format: .v1,
            content: .noData, scope: app, origin: token, firstFailureAt: Date().timeIntervalSince1970)
        pending.payload = Array(token.utf8)
        return pending
    }

    func testAProjectAtItsInFlightLimitLeavesTheSendingPlacesToOtherProjects() async throws {
        // Two sending places; each project at most one request in flight.
        let harness = try GatewayHarness(apps: ["slow": AppSettings(), "fast": AppSettings()], maxInFlight: 2)
        try await harness.start(owning: Array(0..<GatewayHarness.partitions))
        addTeardownBlock { await harness.stop() }
        let slow = FakeSender(provider: "fcm", project: "fcm:slow")
        let fast = FakeSender(provider: "fcm", project: "fcm:fast")
        slow.hold()
        for (name, sender) in [("slow", slow), ("fast", fast)] {
            let current = try XCTUnwrap(harness.profiles.profile(name))
            harness.profiles.set(
                name,
                AppProfile(
                    name: name, settings: current.settings, verifier: nil, rules: current.rules,
                    rulesFingerprint: current.rulesFingerprint, encryption: nil, senders: [.mobile: sender],
                    fcmAccountFingerprint: nil, maxInFlightPerProject: 1))
        }
        harness.delivery.enqueue(try ["s1", "s2", "s3"].map { try queued("slow", $0) })
        harness.delivery.enqueue(try ["f1", "f2", "f3"].map { try queued("fast", $0) })
        // slow's one request hangs; its two other notifications wait in the queue, not in a sending place: fast's
        // go out through the other place meanwhile.
        await harness.eventually("fast's notifications delivered while slow's send hangs") {
            fast.sent.map(\.token) == ["f1", "f2", "f3"]
        }
        XCTAssertEqual(harness.delivery.status(app: "slow", now: Date().timeIntervalSince1970).queued, 3)
        XCTAssertTrue(slow.sent.isEmpty)
        slow.release()
        await harness.eventually("slow's notifications delivered, in order") { slow.sent.map(\.token) == ["s1", "s2", "s3"] }
    }
}
