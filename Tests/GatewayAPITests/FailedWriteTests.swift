import GatewayTesting
import CompactJSON
import Foundation
import GatewayAPI
import PushCore
import XCTest

@testable import Gateway

/// The failure paths of state writes, through ``InMemoryLog/setFailing(_:)`` (a broker that refuses every
/// produce): an API write the log refuses is answered 503 and never applied; a revocation whose writes fail is
/// written again until the log takes it, and only then is the subscription gone for a new owner too.
extension DeliveryOrderTests {
    func devices(_ harness: GatewayHarness) -> Set<String> { Set(harness.subscriptions(Self.app).map(\.subscriber.token)) }

    func testAWriteTheLogRefusesIsAnswered503AndNeverApplied() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "one")
        harness.log.setFailing(true)
        do {
            try await subscribe(harness, device: "refused")
            XCTFail("a write the log refused was acknowledged")
        } catch let error as APIError {
            XCTAssertEqual(error.status, .serviceUnavailable, "\(error)")
            XCTAssertNotNil(error.retryAfterSeconds, "a 503 says when to retry")
            XCTAssertFalse(error.notOwner)
        }
        do {
            try await harness.service.unsubscribe(
                V1UnsubscribeRequest(app: Self.app, path: try DataPath("/x"), deviceID: "one", authToken: nil))
            XCTFail("a delete the log refused was acknowledged")
        } catch let error as APIError {
            XCTAssertEqual(error.status, .serviceUnavailable, "\(error)")
        }
        XCTAssertEqual(devices(harness), ["one"], "neither the refused create nor the refused delete was applied")

        harness.log.setFailing(false)
        try await subscribe(harness, device: "two")
        XCTAssertEqual(devices(harness), ["one", "two"])
        // What a new owner loads from the log is what was acknowledged.
        let next = try await self.harness(log: harness.log)
        XCTAssertEqual(devices(next), ["one", "two"])
    }

    func testARevocationWhoseWritesFailIsWrittenOnceTheLogTakesThem() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "d1")
        try await subscribe(harness, device: "d2")
        harness.log.setFailing(true)
        let partition = try harness.partition(ofApp: Self.app)
        _ = partition.revoke(app: Self.app, delivery: harness.delivery, now: 0) { app in
            [(.permissionDenied, app.index.allSubscriptions().filter { $0.subscriber.token == "d1" })]
        }
        try harness.process(try set("/x", "1"), offset: 0)
        XCTAssertFalse(
            stateRecords(harness).contains { $0.key.contains("\"d1\"") && $0.value == nil }, "no tombstone while the log refuses")

        harness.log.setFailing(false)
        // The key is written again from memory once the log takes writes: the revoked marker, or (the revoke
        // delivered meanwhile) straight the tombstone.
        await harness.eventually(timeout: .seconds(30), "the revocation written: the tombstone") {
            stateRecords(harness).contains { $0.key.contains("\"d1\"") && $0.value == nil }
        }
        XCTAssertEqual(delivered(harness, to: "d1").last, "revoke:permission_denied")
        XCTAssertEqual(delivered(harness, to: "d2"), ["1"])
        XCTAssertEqual(devices(harness), ["d2"])
        let next = try await self.harness(log: harness.log)
        XCTAssertEqual(devices(next), ["d2"], "a new owner loads the revocation")
    }
}
