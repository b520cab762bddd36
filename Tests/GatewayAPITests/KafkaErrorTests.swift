import CRdKafka
import KafkaClient
import XCTest

/// Which failed writes may still have been stored: the line between a `503` (not made) and a `504` (unknown).
final class KafkaErrorTests: XCTestCase {
    private let timedOut = RD_KAFKA_RESP_ERR__MSG_TIMED_OUT.rawValue

    func testATimeoutAfterTheRecordWasSentMayHaveStoredIt() {
        XCTAssertTrue(KafkaError(code: timedOut, message: "sent", possiblyPersisted: true).maybeStored)
    }

    func testATimeoutInTheQueueDidNotStoreIt() {
        // librdkafka's RD_KAFKA_MSG_STATUS_NOT_PERSISTED: never sent (the broker was unreachable all along).
        XCTAssertFalse(KafkaError(code: timedOut, message: "queued", possiblyPersisted: false).maybeStored)
    }

    func testATimeoutOfUnknownStatusIsTakenAsPerhapsStored() {
        XCTAssertTrue(KafkaError(code: timedOut, message: "timed out").maybeStored)
        XCTAssertTrue(KafkaError(code: RD_KAFKA_RESP_ERR__PURGE_INFLIGHT.rawValue, message: "purged").maybeStored)
    }

    func testOtherFailuresDidNotStoreIt() {
        XCTAssertFalse(KafkaError(code: RD_KAFKA_RESP_ERR__PURGE_QUEUE.rawValue, message: "purged", possiblyPersisted: false).maybeStored)
        XCTAssertFalse(KafkaError(code: RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE.rawValue, message: "too large", possiblyPersisted: true).maybeStored)
    }
}
