import KafkaClient
import XCTest

@testable import Gateway

/// The startup check of the user-notifications topic's partition count (``UserNotificationsTopicCheck``).
final class UserNotificationsTopicCheckTests: XCTestCase {
    private typealias Check = UserNotificationsTopicCheck
    private let unknownTopic = KafkaError(code: 3, message: "Broker: Unknown topic or partition")
    private let unreachable = KafkaError(code: -185, message: "Local: Timed out")

    func testTheTopicIsConsumedOnlyWithTheChangeTopicsPartitionCount() {
        XCTAssertEqual(Check.decide(changes: .success(4), notifications: .success(4)), .matches(4))
        XCTAssertTrue(Check.Outcome.matches(4).consumes)
        let differs = Check.decide(changes: .success(4), notifications: .success(2))
        XCTAssertEqual(differs, .differs(changes: 4, notifications: 2))
        XCTAssertFalse(differs.consumes)
        let missing = Check.decide(changes: .success(4), notifications: .failure(unknownTopic))
        XCTAssertEqual(missing, .missing(unknownTopic.description))
        XCTAssertFalse(missing.consumes)
    }

    func testWithoutTheBrokersAnswerItIsConsumedAsBefore() {
        XCTAssertTrue(Check.decide(changes: .failure(unreachable), notifications: .success(4)).consumes)
        XCTAssertTrue(Check.decide(changes: .success(4), notifications: .failure(unreachable)).consumes)
        // The change topic missing is the change consumer's problem (it logs it), not a reason to refuse this one.
        XCTAssertTrue(Check.decide(changes: .failure(unknownTopic), notifications: .success(4)).consumes)
    }
}
