import XCTest

@testable import PushCore

final class MatchingTests: XCTestCase {
    let now: Int64 = 1_000
    let later = SubscriptionSettings(mode: .noData, expiresAt: 10_000)

    func settings(_ mode: SubscriptionMode) -> SubscriptionSettings { SubscriptionSettings(mode: mode, expiresAt: 10_000) }
    func path(_ text: String) -> DataPath { (try? DataPath(text)) ?? .root }
    func device(_ token: String) -> SubscriberKey { SubscriberKey(token: token) }

    func event(_ op: ChangeEvent.Operation, _ path: String, _ after: String? = nil, before: String? = nil) throws -> ChangeEvent {
        try ChangeEvent.validated(app: "app", path: path, operation: op.rawValue, after: after, before: before, eventID: "e", timestampMs: 0)
    }

    func fired(_ notifications: [MatchedNotification]) -> [String] {
        notifications.flatMap { note in note.recipients.map { "\(note.path)#\($0.subscriber.token)" } }.sorted()
    }

    func testFiresAtBelowAndAboveButNotSiblings() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/a/b"), subscriber: device("at"), settings: later)
        index.subscribe(path: path("/a"), subscriber: device("above-write"), settings: later)
        index.subscribe(path: path("/"), subscriber: device("root"), settings: later)
        index.subscribe(path: path("/a/b/c"), subscriber: device("below-write"), settings: later)
        index.subscribe(path: path("/a/x"), subscriber: device("sibling"), settings: later)
        index.subscribe(path: path("/ab"), subscriber: device("prefix-string"), settings: later)

        let result = index.apply(try event(.set, "/a/b", #"{"c":1}"#), now: now)
        XCTAssertEqual(fired(result), ["/#root", "/a#above-write", "/a/b#at", "/a/b/c#below-write"])
    }

    func testSubscriptionBelowFiresOnlyWhenItsValueChanged() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/a/b"), subscriber: device("b"), settings: later)
        index.subscribe(path: path("/a/c"), subscriber: device("c"), settings: later)
        // With `before`, unchanged children are known to be unchanged.
        let result = index.apply(try event(.set, "/a", #"{"b":1,"c":2}"#, before: #"{"b":1,"c":1}"#), now: now)
        XCTAssertEqual(fired(result), ["/a/c#c"])
        // Without it, and without a shadow, the gateway cannot tell: it notifies (at-least-once).
        XCTAssertEqual(fired(index.apply(try event(.set, "/a", #"{"b":1,"c":2}"#), now: now)), ["/a/b#b", "/a/c#c"])
        // MERGE leaves unnamed children alone.
        XCTAssertEqual(fired(index.apply(try event(.merge, "/a", #"{"c":3}"#), now: now)), ["/a/c#c"])
    }

    func testValueModeUsesShadowForWritesBelow() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/p"), subscriber: device("v"), settings: settings(.value))
        // Not seeded yet: NotLoaded.
        var result = index.apply(try event(.set, "/p/x", "1"), now: now)
        XCTAssertEqual(result.first?.content, .value(nil))
        // A write at the node seeds the shadow.
        result = index.apply(try event(.set, "/p", #"{"x":1,"y":{"z":2}}"#), now: now)
        XCTAssertEqual(result.first?.content, .value(try JSONParser.parse(#"{"x":1,"y":{"z":2}}"#)))
        result = index.apply(try event(.set, "/p/y/z", "3"), now: now)
        XCTAssertEqual(result.first?.content, .value(try JSONParser.parse(#"{"x":1,"y":{"z":3}}"#)))
        result = index.apply(try event(.merge, "/p", #"{"x":null,"w":"n"}"#), now: now)
        XCTAssertEqual(result.first?.content, .value(try JSONParser.parse(#"{"w":"n","y":{"z":3}}"#)))
        result = index.apply(try event(.remove, "/p/y"), now: now)
        XCTAssertEqual(result.first?.content, .value(try JSONParser.parse(#"{"w":"n"}"#)))
        // A write above the node sets it from the event's data.
        result = index.apply(try event(.set, "/", #"{"p":{"k":true},"q":1}"#), now: now)
        XCTAssertEqual(result.first?.content, .value(try JSONParser.parse(#"{"k":true}"#)))
        XCTAssertEqual(index.shadow(at: path("/p")), try JSONParser.parse(#"{"k":true}"#))
        result = index.apply(try event(.remove, "/"), now: now)
        XCTAssertEqual(result.first?.content, .value(.null))
    }

    func testChildEventDiffs() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/list"), subscriber: device("c"), settings: settings(.childEvent))
        var result = index.apply(try event(.set, "/list", #"{"a":1,"b":2}"#), now: now)
        // Old value unknown: keys only.
        XCTAssertEqual(result.first?.content, .childEvent(ChildChanges(changed: ["a": .number("1"), "b": .number("2")]), keysOnly: true))
        result = index.apply(try event(.set, "/list", #"{"b":3,"c":4}"#), now: now)
        XCTAssertEqual(result.first?.content, .childEvent(ChildChanges(added: ["c": .number("4")], removed: ["a"], changed: ["b": .number("3")]), keysOnly: false))
        result = index.apply(try event(.set, "/list/d/e", #""x""#), now: now)
        XCTAssertEqual(result.first?.content, .childEvent(ChildChanges(added: ["d": .object(["e": .string("x")])]), keysOnly: false))
        result = index.apply(try event(.merge, "/list", #"{"b":null,"c":5}"#), now: now)
        XCTAssertEqual(result.first?.content, .childEvent(ChildChanges(removed: ["b"], changed: ["c": .number("5")]), keysOnly: false))
        result = index.apply(try event(.remove, "/list/c"), now: now)
        XCTAssertEqual(result.first?.content, .childEvent(ChildChanges(removed: ["c"]), keysOnly: false))
    }

    func testBeforeSeedsChildEventWhenShadowUnknown() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/l"), subscriber: device("c"), settings: settings(.childEvent))
        let result = index.apply(try event(.set, "/l", #"{"a":1}"#, before: #"{"b":1}"#), now: now)
        XCTAssertEqual(result.first?.content, .childEvent(ChildChanges(added: ["a": .number("1")], removed: ["b"]), keysOnly: false))
    }

    func testSnapshotSeedsWithoutNotifying() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/s"), subscriber: device("v"), settings: settings(.value))
        XCTAssertTrue(index.apply(try event(.snapshot, "/s", #"{"n":1}"#), now: now).isEmpty)
        let result = index.apply(try event(.set, "/s/m", "2"), now: now)
        XCTAssertEqual(result.first?.content, .value(try JSONParser.parse(#"{"m":2,"n":1}"#)))
    }

    func testGroupsRecipientsByModeAndSkipsExpired() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/g"), subscriber: device("1"), settings: settings(.noData))
        index.subscribe(path: path("/g"), subscriber: device("2"), settings: settings(.noData))
        index.subscribe(path: path("/g"), subscriber: device("3"), settings: settings(.value))
        index.subscribe(path: path("/g"), subscriber: device("old"), settings: SubscriptionSettings(mode: .noData, expiresAt: now))
        let result = index.apply(try event(.set, "/g", "1"), now: now)
        XCTAssertEqual(result.count, 2)
        XCTAssertEqual(result[0].mode, .noData)
        XCTAssertEqual(Set(result[0].recipients.map(\.subscriber.token)), ["1", "2"])
        XCTAssertEqual(result[1].recipients.map(\.subscriber.token), ["3"])
        XCTAssertEqual(index.expiredSubscriptions(now: now).map(\.subscriber.token), ["old"])
    }

    func testSubscribeRefreshUnsubscribeAndPruning() throws {
        let index = AppIndex(app: "app")
        XCTAssertEqual(index.subscribe(path: path("/a/b"), subscriber: device("d"), settings: later), .created)
        XCTAssertEqual(index.subscribe(path: path("/a/b"), subscriber: device("d"), settings: settings(.value)), .refreshed)
        XCTAssertEqual(index.subscriptionCount, 1)
        XCTAssertEqual(index.subscription(path: path("/a/b"), subscriber: device("d"))?.mode, .value)
        XCTAssertNotNil(index.unsubscribe(path: path("/a/b"), subscriber: device("d")))
        XCTAssertNil(index.unsubscribe(path: path("/a/b"), subscriber: device("d")))
        XCTAssertEqual(index.subscriptionCount, 0)
        XCTAssertTrue(index.root.children.isEmpty)
        XCTAssertTrue(index.apply(try event(.set, "/a/b", "1"), now: now).isEmpty)
    }

    func testNamespaceDeletedRevokesEverything() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/x"), subscriber: device("1"), settings: later)
        index.subscribe(path: path("/"), subscriber: device("2"), settings: settings(.value))
        let result = index.apply(try event(.namespaceDeleted, "/"), now: now)
        XCTAssertEqual(fired(result), ["/#2", "/x#1"])
        XCTAssertTrue(result.allSatisfy { $0.content == .revoke(.namespaceDoesNotExist) })
        XCTAssertEqual(index.subscriptionCount, 0)
    }

    func testEventValidation() {
        XCTAssertThrowsError(try event(.set, "/a.b", "1"))
        XCTAssertThrowsError(try event(.set, "/a", "{bad"))
        XCTAssertThrowsError(try event(.merge, "/a", "1"))
        XCTAssertThrowsError(try event(.merge, "/a", #"{"x.y":1}"#))
        XCTAssertThrowsError(try ChangeEvent.validated(app: "", path: "/", operation: "SET", after: nil, before: nil, eventID: "", timestampMs: 0))
        XCTAssertThrowsError(try ChangeEvent.validated(app: "a", path: "/", operation: "PATCH", after: nil, before: nil, eventID: "", timestampMs: 0))
    }
}

final class OffsetTrackerTests: XCTestCase {
    func testCommitsOnlyTheFinishedPrefix() {
        var tracker = OffsetTracker()
        for offset: Int64 in 10...13 { tracker.start(offset) }
        XCTAssertNil(tracker.finish(12))
        XCTAssertEqual(tracker.finish(10), 11)
        XCTAssertEqual(tracker.finish(11), 13)
        XCTAssertEqual(tracker.inFlight, 1)
        XCTAssertEqual(tracker.finish(13), 14)
        XCTAssertNil(tracker.finish(99))
    }
}

final class SubscriptionRecordTests: XCTestCase {
    func testRoundTripAndTombstone() throws {
        let subscription = Subscription(
            path: try DataPath("/a/é"), subscriber: SubscriberKey(kind: .huawei, token: "t\"k", uid: "u1"),
            settings: SubscriptionSettings(mode: .childEvent, format: .v2, expiresAt: 1_767_225_600))
        let record = SubscriptionRecord(app: "toto", subscription: subscription)
        XCTAssertEqual(String(decoding: record.key, as: UTF8.self), #"["toto","/a/é","huawei","t\"k","u1"]"#)
        XCTAssertEqual(String(decoding: record.value ?? [], as: UTF8.self), #"{"expiresAt":1767225600,"format":"v2","mode":"childEvent"}"#)
        XCTAssertEqual(try SubscriptionRecord.decode(key: record.key, value: record.value), record)
        let tombstone = try SubscriptionRecord.decode(key: record.key, value: nil)
        XCTAssertNil(tombstone.settings)
        let index = AppIndex(app: "toto")
        record.apply(to: index)
        XCTAssertEqual(index.subscriptionCount, 1)
        tombstone.apply(to: index)
        XCTAssertEqual(index.subscriptionCount, 0)
        XCTAssertThrowsError(try SubscriptionRecord.decode(key: Array("[1]".utf8), value: nil))
        XCTAssertThrowsError(try SubscriptionRecord.decode(key: record.key, value: Array("{}".utf8)))
    }
}

final class ShadowCheckpointTests: XCTestCase {
    func testChangedShadowsAreReportedAndRestore() throws {
        let index = AppIndex(app: "a")
        let path = try DataPath("/p")
        index.subscribe(path: path, subscriber: SubscriberKey(token: "t"), settings: SubscriptionSettings(mode: .value, expiresAt: .max))
        _ = index.apply(try ChangeEvent.validated(app: "a", path: "/p", operation: "SET", after: #"{"x":1}"#, before: nil, eventID: "", timestampMs: 0), now: 0)
        XCTAssertEqual(index.changedShadows.map(\.path), [path])
        let record = StateRecord.shadow(ShadowRecord(app: "a", path: path, value: index.changedShadows[0].value))
        XCTAssertEqual(String(decoding: record.key, as: UTF8.self), #"["shadow","a","/p"]"#)
        XCTAssertEqual(String(decoding: record.value ?? [], as: UTF8.self), #"{"x":1}"#)
        // A fresh index (a restarted replica) restores it from the record.
        let restarted = AppIndex(app: "a")
        restarted.subscribe(path: path, subscriber: SubscriberKey(token: "t"), settings: SubscriptionSettings(mode: .value, expiresAt: .max))
        try StateRecord.decode(key: record.key, value: record.value).apply(to: restarted)
        let result = restarted.apply(try ChangeEvent.validated(app: "a", path: "/p/y", operation: "SET", after: "2", before: nil, eventID: "", timestampMs: 0), now: 0)
        XCTAssertEqual(result.first?.content, .value(try JSONParser.parse(#"{"x":1,"y":2}"#)))
        // Unchanged data is not reported again.
        _ = restarted.apply(try ChangeEvent.validated(app: "a", path: "/p/y", operation: "SET", after: "2", before: nil, eventID: "", timestampMs: 0), now: 0)
        XCTAssertTrue(restarted.changedShadows.isEmpty)
    }
}
