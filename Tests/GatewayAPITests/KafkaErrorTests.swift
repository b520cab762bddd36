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

    func testARecordSentOnceThenRefusedMayHaveBeenStored() {
        // The first attempt was sent and never answered (a frozen process, a request timeout); its retry was refused
        // because the broker fenced the producer. librdkafka keeps the status POSSIBLY_PERSISTED across the retry.
        for code in [RD_KAFKA_RESP_ERR_PRODUCER_FENCED, RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER] {
            XCTAssertTrue(KafkaError(code: code.rawValue, message: "refused on retry", possiblyPersisted: true).maybeStored, "\(code)")
            XCTAssertFalse(KafkaError(code: code.rawValue, message: "refused, never sent before", possiblyPersisted: false).maybeStored, "\(code)")
        }
    }

    func testOtherFailuresDidNotStoreIt() {
        XCTAssertFalse(KafkaError(code: RD_KAFKA_RESP_ERR__PURGE_QUEUE.rawValue, message: "purged", possiblyPersisted: false).maybeStored)
        XCTAssertFalse(KafkaError(code: RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE.rawValue, message: "too large", possiblyPersisted: false).maybeStored)
        // Not a delivery report (refused before anything was queued): nothing was sent.
        XCTAssertFalse(KafkaError(code: RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE.rawValue, message: "too large").maybeStored)
        XCTAssertFalse(KafkaError(code: RD_KAFKA_RESP_ERR__QUEUE_FULL.rawValue, message: "queue full").maybeStored)
    }
}
