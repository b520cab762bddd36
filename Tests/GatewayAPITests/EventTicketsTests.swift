import Synchronization
import XCTest

@testable import Gateway

/// EventTickets keeps each partition's tickets apart (its own lock): releases, abandons and ids per partition.
final class EventTicketsTests: XCTestCase {
    private final class Finished: Sendable {
        private let list = Mutex<[String]>([])
        func add(_ topic: String?, _ partition: Int32, _ offset: Int64) { list.withLock { $0.append("\(topic ?? "-") \(partition)@\(offset)") } }
        var all: [String] { list.withLock { $0 } }
    }

    func testTicketsOfEachPartitionFinishAndAreAbandonedApart() {
        let finished = Finished()
        let tickets = EventTickets(onFinished: { finished.add($0, $1, $2) })
        let a = tickets.open(partition: 0, offset: 7)
        let b = tickets.open(partition: 3, offset: 7)
        let c = tickets.open(partition: 3, offset: 2, topic: "notes")
        XCTAssertEqual(Set([a, b, c]).count, 3)
        tickets.retain(b)
        tickets.release([a, b, c])
        XCTAssertEqual(finished.all, ["- 0@7", "notes 3@2"], "b is still held once")
        XCTAssertTrue(tickets.isOpen(b))
        XCTAssertFalse(tickets.isOpen(a))

        let d = tickets.open(partition: 0, offset: 8)
        XCTAssertEqual(tickets.abandon(partitions: [3]), 1)
        XCTAssertFalse(tickets.isOpen(b))
        XCTAssertTrue(tickets.isOpen(d), "another partition's tickets stay")
        XCTAssertEqual(tickets.openCount(partition: 0), 1)
        XCTAssertEqual(tickets.openCount(partition: 3), 0)
        // A ticket opened after the abandon never gets an abandoned ticket's id: the late release of the abandoned
        // one is ignored.
        let e = tickets.open(partition: 3, offset: 9)
        XCTAssertNotEqual(e, b)
        tickets.release(b)
        XCTAssertTrue(tickets.isOpen(e))
        tickets.release([d, e])
        XCTAssertEqual(finished.all, ["- 0@7", "notes 3@2", "- 0@8", "- 3@9"])
    }
}
