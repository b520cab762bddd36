import Foundation
import GatewayCore
import Providers
import PushCore
import XCTest

@testable import Gateway

final class EventHookTests: XCTestCase {
    private static let time = 1_700_000_000.123  // 2023-11-14T22:13:20.123Z

    private static func subscription(
        path: String = "/users/alice/phone", subscriber: SubscriberKey, format: NotificationFormat = .v2, authUID: String? = nil
    ) throws -> Subscription {
        Subscription(
            path: try DataPath(path), subscriber: subscriber,
            settings: SubscriptionSettings(mode: .value, format: format, expiresAt: 2_000_000_000, authUID: authUID))
    }

    private static func text(_ event: EventHookEvent) -> String { String(decoding: event.body, as: UTF8.self) }

    // MARK: Bodies (docs/PAYLOADS.md, "Event hook")

    func testADeadTokenEventCarriesTheSubscriptionAndTheProvidersAnswer() throws {
        let subscriber = SubscriberKey(kind: .mobile, token: "tok:APA91b\"x\"", uid: "alice")
        let ended = EndedSubscription(
            app: "toto", subscription: try Self.subscription(subscriber: subscriber),
            cause: .tokenDead(
                ProviderAnswer(provider: "fcm", httpStatus: 404, code: "UNREGISTERED", message: "Requested entity was not found."), revoking: nil))
        let event = EventHookEvent(ended, at: Self.time)
        let id = SubscriptionID.make(app: "toto", path: try DataPath("/users/alice/phone"), subscriber: subscriber)
        XCTAssertEqual(event.type, "subscription.token_dead")
        XCTAssertEqual(
            Self.text(event),
            #"{"type":"subscription.token_dead","timestamp":"2023-11-14T22:13:20.123Z","data":{"app":"toto","id":""# + id
                + #"","uid":"alice","kind":"mobile","mode":"value","path":"/users/alice/phone","format":"v2","context":"tok:APA91b\"x\"","#
                + #""provider":{"name":"fcm","status":404,"code":"UNREGISTERED","message":"Requested entity was not found."}}}"#)
        // The id is the body's: the same event twice has the same webhook-id; another time, another id.
        XCTAssertEqual(event.id, EventHookEvent(ended, at: Self.time).id)
        XCTAssertNotEqual(event.id, EventHookEvent(ended, at: Self.time + 1).id)
        XCTAssertTrue(event.id.hasPrefix("evt_"))
        XCTAssertEqual(event.id.utf8.count, 26)
    }

    func testADeadTokenWithoutStatusOrTextAndARevocationItInterrupted() throws {
        let subscriber = SubscriberKey(kind: .huawei, token: "hms-token")
        let ended = EndedSubscription(
            app: "toto", subscription: try Self.subscription(path: "/a", subscriber: subscriber, format: .v1, authUID: "bob"),
            cause: .tokenDead(ProviderAnswer(provider: "hms", code: "hms_80300007"), revoking: .disabled))
        let id = SubscriptionID.make(app: "toto", path: try DataPath("/a"), subscriber: subscriber)
        XCTAssertEqual(
            Self.text(EventHookEvent(ended, at: 0)),
            #"{"type":"subscription.token_dead","timestamp":"1970-01-01T00:00:00.000Z","data":{"app":"toto","id":""# + id
                + #"","uid":"bob","kind":"huawei","mode":"value","path":"/a","format":"v1","context":"hms-token","#
                + #""provider":{"name":"hms","status":null,"code":"hms_80300007","message":null},"revocation":"disabled"}}"#,
            "a v1 subscription's uid is its token's")
    }

    func testRevokedAndExpiredEvents() throws {
        let webhook = SubscriberKey.webhook(destination: "https://backend.example/hook", context: "ctx", uid: "carol")
        let subscription = try Self.subscription(path: "/", subscriber: webhook)
        let id = SubscriptionID.make(app: "toto", path: .root, subscriber: webhook)
        let common = #""data":{"app":"toto","id":""# + id
            + #"","uid":"carol","kind":"webhook","mode":"value","path":"/","format":"v2","context":"ctx","destination":"https://backend.example/hook""#
        let revoked = EventHookEvent(EndedSubscription(app: "toto", subscription: subscription, cause: .revoked(.permissionDenied)), at: Self.time)
        XCTAssertEqual(revoked.type, "subscription.revoked")
        XCTAssertEqual(
            Self.text(revoked),
            #"{"type":"subscription.revoked","timestamp":"2023-11-14T22:13:20.123Z","# + common + #","reason":"permission_denied"}}"#)
        let expired = EventHookEvent(EndedSubscription(app: "toto", subscription: subscription, cause: .revoked(.expired)), at: Self.time)
        XCTAssertEqual(expired.type, "subscription.expired")
        XCTAssertEqual(Self.text(expired), #"{"type":"subscription.expired","timestamp":"2023-11-14T22:13:20.123Z","# + common + "}}")
        let anonymous = try Self.subscription(path: "/a", subscriber: SubscriberKey(token: "t"), format: .v1)
        XCTAssertTrue(
            Self.text(EventHookEvent(EndedSubscription(app: "toto", subscription: anonymous, cause: .revoked(.tooBig)), at: 0))
                .contains(#""uid":null,"#))
    }

    func testTimestampsAreRFC3339InUTCWithMilliseconds() {
        XCTAssertEqual(EventHookEvent.timestamp(0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(EventHookEvent.timestamp(951_782_400), "2000-02-29T00:00:00.000Z")
        XCTAssertEqual(EventHookEvent.timestamp(951_868_799.999), "2000-02-29T23:59:59.999Z")
        XCTAssertEqual(EventHookEvent.timestamp(1_700_000_000.123), "2023-11-14T22:13:20.123Z")
        XCTAssertEqual(EventHookEvent.timestamp(4_102_444_800), "2100-01-01T00:00:00.000Z")
        XCTAssertEqual(EventHookEvent.timestamp(-5), "1970-01-01T00:00:00.000Z")
    }

    // MARK: The queue

    private static func event(_ n: Int) throws -> EventHookEvent {
        let ended = EndedSubscription(
            app: "toto", subscription: try subscription(path: "/\(n)", subscriber: SubscriberKey(token: "t")), cause: .revoked(.disabled))
        return EventHookEvent(ended, at: Double(n))
    }

    private struct FixedRandom: RandomNumberGenerator {
        mutating func next() -> UInt64 { UInt64.max / 2 }
    }

    private static let failure503 = DeliveryOutcome.failed(DeliveryFailure(reason: "http_503", classification: .retryable, httpStatus: 503))
    private static let policy = RetryPolicy(jitter: 0)

    func testEachAppsEventsGoInOrderOneAtATime() throws {
        var queue = EventHookQueue()
        var random = FixedRandom()
        for n in 1...3 { XCTAssertTrue(queue.enqueue(app: "a", event: try Self.event(n), limit: 10)) }
        XCTAssertTrue(queue.enqueue(app: "b", event: try Self.event(9), limit: 10))
        let first = queue.due(now: 0).sorted { $0.app < $1.app }
        XCTAssertEqual(first.map(\.app), ["a", "b"], "apps are independent")
        XCTAssertEqual(first[0].entry.event, try Self.event(1))
        XCTAssertTrue(queue.due(now: 100).isEmpty, "one event in flight per app")
        XCTAssertEqual(queue.finish(app: "a", outcome: .sent, now: 1, policy: Self.policy, random: &random), .sent)
        XCTAssertEqual(queue.due(now: 1).map(\.entry.event), [try Self.event(2)])
        XCTAssertEqual(queue.count, 3)
        XCTAssertEqual(queue.count(app: "a"), 2)
    }

    /// App `a` with events 1 and 2, the first in flight.
    private static func twoEventsOneInFlight() throws -> EventHookQueue {
        var queue = EventHookQueue()
        XCTAssertTrue(queue.enqueue(app: "a", event: try event(1), limit: 10))
        XCTAssertTrue(queue.enqueue(app: "a", event: try event(2), limit: 10))
        XCTAssertEqual(queue.due(now: 0).map(\.entry.event), [try event(1)])
        return queue
    }

    func testAFailedHeadIsRetriedWithBackoffAndRetryAfterThenGivenUpAfterTwoHours() throws {
        var queue = try Self.twoEventsOneInFlight()
        var random = FixedRandom()
        XCTAssertEqual(queue.finish(app: "a", outcome: Self.failure503, now: 0, policy: Self.policy, random: &random), .retry(at: 1, reason: "http_503"))
        XCTAssertTrue(queue.due(now: 0.5).isEmpty, "not before its backoff, and nothing overtakes it")
        XCTAssertEqual(queue.nextWakeUp, 1)
        let again = queue.due(now: 1)
        XCTAssertEqual(again.map(\.entry.event), [try Self.event(1)], "the same event (the same webhook-id)")
        XCTAssertEqual(again.first?.entry.failures, 1)
        let retryAfter = DeliveryOutcome.failed(DeliveryFailure(reason: "http_429", classification: .retryable, retryAfter: 30, httpStatus: 429))
        XCTAssertEqual(queue.finish(app: "a", outcome: retryAfter, now: 1, policy: Self.policy, random: &random), .retry(at: 31, reason: "http_429"))
        _ = queue.due(now: 31)
        XCTAssertEqual(
            queue.finish(app: "a", outcome: Self.failure503, now: 7_199, policy: Self.policy, random: &random), .gaveUp(reason: "http_503"),
            "the next attempt would be more than 2 hours after the first failure")
        XCTAssertEqual(queue.due(now: 7_199).map(\.entry.event), [try Self.event(2)], "the line moves on")
    }

    func testARefusedEventIsDroppedAndTheLineMovesOn() throws {
        var queue = try Self.twoEventsOneInFlight()
        var random = FixedRandom()
        for (status, reason) in [(400, "http_400"), (410, "http_410")] {
            let refused = DeliveryOutcome.failed(
                DeliveryFailure(reason: reason, classification: status == 410 ? .tokenDead : .rejected, httpStatus: status))
            XCTAssertEqual(queue.finish(app: "a", outcome: refused, now: 0, policy: Self.policy, random: &random), .rejected(reason: reason))
            _ = queue.due(now: 0)
        }
        XCTAssertEqual(queue.count, 0)
        XCTAssertNil(queue.nextWakeUp)
    }

    func testTheQueueIsBoundedPerAppAndCanBeDropped() throws {
        var queue = EventHookQueue()
        var random = FixedRandom()
        for n in 1...2 { XCTAssertTrue(queue.enqueue(app: "a", event: try Self.event(n), limit: 2)) }
        XCTAssertFalse(queue.enqueue(app: "a", event: try Self.event(3), limit: 2), "full: refused")
        XCTAssertTrue(queue.enqueue(app: "b", event: try Self.event(3), limit: 2), "another app has its own bound")
        _ = queue.due(now: 0)
        XCTAssertEqual(queue.removeAll(app: "a"), 2)
        XCTAssertEqual(queue.finish(app: "a", outcome: .sent, now: 0, policy: Self.policy, random: &random), .gone)
        XCTAssertEqual(queue.count, 1)
        XCTAssertEqual(queue.removeAll(), 1)
        XCTAssertEqual(queue.count, 0)
    }

    func testALongLineIsCompactedAsItDrains() throws {
        var queue = EventHookQueue()
        var random = FixedRandom()
        for n in 0..<200 { XCTAssertTrue(queue.enqueue(app: "a", event: try Self.event(n), limit: 1000)) }
        for n in 0..<200 {
            XCTAssertEqual(queue.due(now: 0).map(\.entry.event), [try Self.event(n)])
            XCTAssertEqual(queue.finish(app: "a", outcome: .sent, now: 0, policy: Self.policy, random: &random), .sent)
        }
        XCTAssertEqual(queue.count, 0)
    }

    // MARK: Settings

    private static func settings(url: String, secrets: [String] = ["whsec_" + String(repeating: "a", count: 32)], allowPrivate: Bool = false)
        -> AppSettings
    {
        var settings = AppSettings()
        var webhook = WebhookSettings()
        webhook.secrets = secrets
        webhook.allowPrivateDestinations = allowPrivate
        settings.webhook = secrets.isEmpty ? nil : webhook
        var hook = EventHookSettings()
        hook.url = url
        settings.eventHook = hook
        return settings
    }

    func testTheHookIsCheckedAtSettingsLoad() {
        XCTAssertNoThrow(try Self.settings(url: "https://backend.example.com/events").validate())
        XCTAssertNoThrow(try Self.settings(url: "https://127.0.0.1:8443/events", allowPrivate: true).validate())
        for (url, fragment) in [
            ("http://backend.example.com/events", "https://"), ("https://127.0.0.1/events", "refused"), ("https://localhost/e", "refused"),
            ("https://[::1]/e", "refused"), ("https://10.0.0.1/e", "refused"), ("", "https://"),
        ] {
            XCTAssertThrowsError(try Self.settings(url: url).validate(), url) { error in
                XCTAssertTrue("\(error)".contains("eventHook.url"), "\(error)")
                XCTAssertTrue("\(error)".contains(fragment), "\(error)")
            }
        }
        XCTAssertThrowsError(try Self.settings(url: "https://backend.example.com/events", secrets: []).validate()) { error in
            XCTAssertTrue("\(error)".contains("webhook.secrets"), "\(error)")
        }
        var unbounded = Self.settings(url: "https://backend.example.com/events")
        unbounded.eventHook?.maxQueuedEvents = 0
        XCTAssertThrowsError(try unbounded.validate())
    }

    func testTheHookIsReadFromTheAppsSettingsDocument() throws {
        let settings = try JSONDecoder().decode(AppSettings.self, from: try JSONSerialization.data(withJSONObject: [
            "webhook": ["secrets": ["whsec_" + String(repeating: "a", count: 32)]],
            "eventHook": ["url": "https://backend.example.com/events", "maxQueuedEvents": 50],
        ]))
        XCTAssertEqual(settings.eventHook?.url, "https://backend.example.com/events")
        XCTAssertEqual(settings.eventHook?.maxQueuedEvents, 50)
        XCTAssertNoThrow(try settings.validate())
    }
}
