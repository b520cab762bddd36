import GatewayTesting
import Foundation
import CompactJSON
import GatewayAPI
import PushCore
import XCTest

@testable import Gateway

/// The partition's driver (``PartitionState``) issues the machine's ordered actions outside the partition's lock,
/// one thread at a time, in decision order; a caller returns once its own actions are issued. These tests drive it
/// from many threads at once (API writes, events, acknowledgements) and through produces the log refuses at once.
extension DeliveryOrderTests {
    /// Runs `count` subscribes of devices named `prefix`0… at once; returns the devices whose write was
    /// acknowledged and the errors of the others.
    private static func subscribeConcurrently(
        _ harness: GatewayHarness, prefix: String, count: Int
    ) async -> (stored: Set<String>, refused: [APIError]) {
        await withTaskGroup(of: (String, APIError?).self) { group in
            for index in 0..<count {
                let device = "\(prefix)\(index)"
                group.addTask {
                    do {
                        try await harness.service.subscribe(
                            V1SubscribeRequest(app: Self.app, path: try DataPath("/x"), deviceID: device, mode: .value, authToken: nil))
                        return (device, nil)
                    } catch let error as APIError {
                        return (device, error)
                    } catch {
                        return (device, APIError(.internalServerError, "unexpected", "\(error)"))
                    }
                }
            }
            var stored: Set<String> = []
            var refused: [APIError] = []
            for await (device, error) in group {
                if let error { refused.append(error) } else { stored.insert(device) }
            }
            return (stored, refused)
        }
    }

    func testWritesAndEventsFromManyThreadsAreAllStoredInOrderAndLoadBack() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "watcher")
        // Events matched on another thread while the writes go on: their notifications and shadow checkpoints
        // are issued by whichever thread drains the partition's actions.
        let app = Self.app
        let events = Task.detached { try processEvents(harness, app: app, count: 50) }
        let (stored, refused) = await Self.subscribeConcurrently(harness, prefix: "d", count: 120)
        try await events.value
        XCTAssertEqual(refused.map(\.status), [], "every write is acknowledged: \(refused)")
        XCTAssertEqual(stored.count, 120)
        XCTAssertEqual(devices(harness), stored.union(["watcher"]))
        // The watcher got every event, in order (each line's notifications were issued in decision order).
        await harness.eventually("the watcher's notifications") { delivered(harness, to: "watcher").count == 50 }
        XCTAssertEqual(delivered(harness, to: "watcher"), (0..<50).map { "\($0)" })
        // The log holds them in the order acknowledged: a new owner loads exactly what was answered.
        let next = try await self.harness(log: harness.log)
        XCTAssertEqual(devices(next), stored.union(["watcher"]))
    }

    func testAProduceTheLogRefusesAtOnceFailsOnlyItsWriteAndTheNextOnesAreStored() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "first")
        harness.log.refuseNext(1)
        do {
            try await subscribe(harness, device: "refused")
            XCTFail("a write the log refused at once was acknowledged")
        } catch let error as APIError {
            XCTAssertEqual(error.status, .serviceUnavailable, "\(error)")
            XCTAssertFalse(error.notOwner)
        }
        XCTAssertEqual(devices(harness), ["first"], "the refused create was not applied")
        try await subscribe(harness, device: "after")
        XCTAssertEqual(devices(harness), ["first", "after"])
        let next = try await self.harness(log: harness.log)
        XCTAssertEqual(devices(next), ["first", "after"])
    }

    func testRefusalsAmongConcurrentWritesFailExactlyTheRefusedOnes() async throws {
        let harness = try await harness()
        harness.log.refuseNext(3)
        let (stored, refused) = await Self.subscribeConcurrently(harness, prefix: "c", count: 40)
        XCTAssertEqual(refused.count, 3, "\(refused)")
        XCTAssertEqual(Set(refused.map(\.status)), [.serviceUnavailable])
        XCTAssertEqual(devices(harness), stored, "memory holds exactly the acknowledged writes")
        let next = try await self.harness(log: harness.log)
        XCTAssertEqual(devices(next), stored, "the log holds exactly the acknowledged writes")
    }

    func testARevocationWhoseTombstoneIsRefusedAtOnceIsRepaired() async throws {
        let harness = try await harness()
        try await subscribe(harness, device: "d1")
        try await subscribe(harness, device: "d2")
        // The marker and, once the revoke is delivered, the tombstone: the first is refused at once.
        harness.log.refuseNext(1)
        let partition = try harness.partition(ofApp: Self.app)
        _ = partition.revoke(app: Self.app, delivery: harness.delivery, now: 0) { app in
            [(.permissionDenied, app.index.allSubscriptions().filter { $0.subscriber.token == "d1" })]
        }
        await harness.eventually(timeout: .seconds(30), "the revocation written again: the tombstone") {
            stateRecords(harness).contains { $0.key.contains("\"d1\"") && $0.value == nil }
        }
        XCTAssertEqual(delivered(harness, to: "d1").last, "revoke:permission_denied")
        XCTAssertEqual(devices(harness), ["d2"])
        let next = try await self.harness(log: harness.log)
        XCTAssertEqual(devices(next), ["d2"], "a new owner loads the revocation")
    }
}

/// Matches `count` SET events of `/x` of `app` (values 0…) in offset order.
private func processEvents(_ harness: GatewayHarness, app: String, count: Int) throws {
    for offset in 0..<count {
        let event = ChangeEvent(app: app, path: try DataPath("/x"), operation: .set, after: .number("\(offset)"))
        try harness.process(event, offset: Int64(offset))
    }
}
