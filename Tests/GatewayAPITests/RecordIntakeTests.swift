import KafkaClient
import XCTest

@testable import Gateway

/// The change consumer's intake (``RecordIntake``): records of a partition not activated yet are dropped and read again
/// from the first dropped offset on activation; a new assignment or a partition given up forgets them.
final class RecordIntakeTests: XCTestCase {
    private final class Loaded {
        var serving = true
    }

    private let changes = "changes"
    private let companion = "user-notifications"

    func testRecordsBeforeTheActivationAreDroppedAndReadAgainFromTheFirst() throws {
        var intake = RecordIntake<Loaded>()
        // Fetched while loading (a pause applied late): offsets 7, 8 of the change topic, 3 of the companion.
        for offset: Int64 in [7, 8] {
            XCTAssertFalse(intake.accepts(topic: changes, partition: 2, offset: offset) { $0.serving })
        }
        XCTAssertFalse(intake.accepts(topic: companion, partition: 2, offset: 3) { $0.serving })
        XCTAssertFalse(intake.accepts(topic: changes, partition: 5, offset: 40) { $0.serving })
        let state = Loaded()
        intake.loaded(2, state: state)
        let requests = intake.takeRequests()
        XCTAssertEqual(requests.due.map(\.partition), [2])
        XCTAssertTrue(intake.takeRequests().due.isEmpty, "handed over once")
        let rewind = try XCTUnwrap(intake.activate(2, state: state))
        XCTAssertEqual(rewind, [TopicPartition(topic: changes, partition: 2): 7, TopicPartition(topic: companion, partition: 2): 3])
        // Handed on from now; the other partition's drop is kept for its own activation.
        XCTAssertTrue(intake.accepts(topic: changes, partition: 2, offset: 7) { $0.serving })
        XCTAssertTrue(intake.accepts(topic: companion, partition: 2, offset: 3) { $0.serving })
        XCTAssertEqual(intake.activate(5, state: Loaded()), [TopicPartition(topic: changes, partition: 5): 40])
    }

    func testAnActiveStateIsActivatedOnceAndNothingDroppedMeansNoSeek() {
        var intake = RecordIntake<Loaded>()
        let state = Loaded()
        XCTAssertEqual(intake.activate(1, state: state), [:])
        XCTAssertNil(intake.activate(1, state: state), "already active: no seek back over records handed on")
        // A state loaded again replaces it.
        XCTAssertEqual(intake.activate(1, state: Loaded()), [:])
    }

    func testAStateThatStopsServingDropsAndKeepsTheFirstOffset() throws {
        var intake = RecordIntake<Loaded>()
        let state = Loaded()
        _ = intake.activate(4, state: state)
        XCTAssertTrue(intake.accepts(topic: changes, partition: 4, offset: 10) { $0.serving })
        state.serving = false  // given up while records were in the queue
        XCTAssertFalse(intake.accepts(topic: changes, partition: 4, offset: 12) { $0.serving })
        intake.drop(topic: changes, partition: 4, offset: 11)  // handed on, then not admitted
        let next = Loaded()
        XCTAssertEqual(intake.activate(4, state: next), [TopicPartition(topic: changes, partition: 4): 11])
    }

    func testAResetForgetsDropsActivationsAndTakeBacks() {
        var intake = RecordIntake<Loaded>()
        let state = Loaded()
        _ = intake.activate(3, state: state)
        XCTAssertFalse(intake.accepts(topic: changes, partition: 6, offset: 9) { $0.serving })
        intake.loaded(6, state: Loaded())
        intake.requestTakeBack(6)
        intake.requestTakeBack(8)
        intake.reset([3, 6])
        // Partition 3 is no longer handed on; 6's drop, activation and take-back are gone; 8's take-back stays.
        XCTAssertFalse(intake.accepts(topic: changes, partition: 3, offset: 1) { $0.serving })
        let requests = intake.takeRequests()
        XCTAssertEqual(requests.takeBack, [8])
        XCTAssertTrue(requests.due.isEmpty)
        XCTAssertEqual(intake.activate(6, state: Loaded()), [:], "a new assignment reads from the committed offset")
        XCTAssertEqual(intake.activate(3, state: state), [TopicPartition(topic: changes, partition: 3): 1])
    }
}
