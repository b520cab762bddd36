import Providers
import PushCore
import XCTest

@testable import Gateway

/// What a queued notification is sent with (``DeliveryOptions/of(_:now:)``): a user notification's collapse key and
/// its TTL counted from the first attempt; change events, none.
final class DeliveryOptionsTests: XCTestCase {
    private func pending(_ content: NotificationContent, attempt: Int = 0, firstFailureAt: Double = 1000) -> PendingNotification {
        PendingNotification(
            app: "demo", path: DataPath.root, subscriber: SubscriberKey(kind: .mobile, token: "t"), format: .v2,
            content: content, firstFailureAt: firstFailureAt, attempt: attempt)
    }

    private func user(ttl: Int?, key: String? = "k") -> NotificationContent {
        .user(UserMessage(data: .object([:]), eventID: "e", collapseKey: key, ttlSeconds: ttl))
    }

    func testChangeEventsHaveNone() {
        XCTAssertEqual(DeliveryOptions.of(pending(.noData), now: 5000), DeliveryOptions.none)
        XCTAssertEqual(DeliveryOptions.of(pending(user(ttl: nil, key: nil)), now: 5000), DeliveryOptions.none)
    }

    func testTheFirstAttemptCarriesTheTTLAsPublished() {
        // Even long after it was queued (behind a backing-off line): counted from the first attempt.
        XCTAssertEqual(DeliveryOptions.of(pending(user(ttl: 60)), now: 9000), DeliveryOptions(ttlSeconds: 60, collapseKey: "k"))
        XCTAssertEqual(DeliveryOptions.of(pending(user(ttl: 0)), now: 9000), DeliveryOptions(ttlSeconds: 0, collapseKey: "k"))
        XCTAssertEqual(DeliveryOptions.of(pending(user(ttl: nil)), now: 9000), DeliveryOptions(collapseKey: "k"))
    }

    func testARetryCarriesWhatIsLeftAndNothingOnceItRanOut() {
        XCTAssertEqual(
            DeliveryOptions.of(pending(user(ttl: 60), attempt: 2, firstFailureAt: 1000), now: 1010.5), DeliveryOptions(ttlSeconds: 49, collapseKey: "k"))
        XCTAssertNil(DeliveryOptions.of(pending(user(ttl: 60), attempt: 2, firstFailureAt: 1000), now: 1060))
        XCTAssertNil(DeliveryOptions.of(pending(user(ttl: 0), attempt: 1, firstFailureAt: 1000), now: 1000.2))
        // Without a TTL a retry is sent whenever it is due.
        XCTAssertEqual(DeliveryOptions.of(pending(user(ttl: nil), attempt: 5, firstFailureAt: 1000), now: 8000), DeliveryOptions(collapseKey: "k"))
    }
}
