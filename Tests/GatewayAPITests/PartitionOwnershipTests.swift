import Synchronization
import XCTest

@testable import Gateway

/// The one place that says what this replica owns and has loaded: `/readyz`, the membership record and the router
/// read it, the change consumer changes it.
final class PartitionOwnershipTests: XCTestCase {
    func testChangesAreHeardOnceEachAndReadinessFollows() {
        let ownership = PartitionOwnership()
        let health = Health(ownership: ownership)
        let heard = Mutex<[PartitionOwnership.Snapshot]>([])
        ownership.onChange { snapshot in heard.withLock { $0.append(snapshot) } }
        XCTAssertEqual(health.notReadyReason, "waiting for the consumer group to assign partitions")

        ownership.take([0, 1])
        XCTAssertEqual(health.notReadyReason, "loading partitions [0, 1] of the state topic")
        XCTAssertTrue(ownership.loaded(0))
        XCTAssertFalse(ownership.loaded(3), "a partition not owned is never ready")
        XCTAssertTrue(ownership.loaded(1))
        XCTAssertNil(health.notReadyReason)
        ownership.loaded(1)  // no change: not heard

        ownership.forget([1], fenced: true)
        XCTAssertEqual(ownership.fenced, [1])
        XCTAssertEqual(ownership.snapshot.owned, [0])
        ownership.take([1])
        XCTAssertEqual(ownership.fenced, [], "taken back: no longer fenced")
        XCTAssertEqual(
            heard.withLock { $0.map { [$0.owned.sorted(), $0.ready.sorted()] } },
            [[[0, 1], []], [[0, 1], [0]], [[0, 1], [0, 1]], [[0], [0]], [[0, 1], [0]]])
    }
}
