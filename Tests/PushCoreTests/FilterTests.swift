import XCTest

@testable import PushCore

/// Subscription filters (issue 20, item 3): validation, matching, narrowed content, shadows kept exact, the
/// state record and the byte estimate.
final class FilterTests: XCTestCase {
    let now: Int64 = 1_000

    func path(_ text: String) -> DataPath { (try? DataPath(text)) ?? .root }
    func device(_ token: String) -> SubscriberKey { SubscriberKey(token: token, uid: "u") }

    func settings(_ mode: SubscriptionMode, keys: [String]? = nil, events: ChildEventKinds? = nil) throws -> SubscriptionSettings {
        SubscriptionSettings(
            mode: mode, format: .v2, expiresAt: 10_000, authUID: "u", filters: try SubscriptionFilters(keys: keys, events: events))
    }

    func event(_ op: ChangeEvent.Operation, _ path: String, _ after: String? = nil, before: String? = nil) throws -> ChangeEvent {
        try ChangeEvent.validated(app: "app", path: path, operation: op.rawValue, after: after, before: before, eventID: "e", timestampMs: 0)
    }

    func fired(_ notifications: [MatchedNotification]) -> [String] {
        notifications.flatMap { note in note.recipients.map { "\(note.path)#\($0.subscriber.token)" } }.sorted()
    }

    func content(_ notifications: [MatchedNotification], _ token: String) -> NotificationContent? {
        notifications.first { $0.recipients.contains { $0.subscriber.token == token } }?.content
    }

    func json(_ text: String) throws -> JSONValue { try JSONParser.parse(text) }

    // MARK: Validation

    func testValidationRefusesWhatCouldNeverMatchOrIsTooBig() throws {
        func error(_ body: String) -> String? {
            guard let value = try? JSONParser.parse(body) else { return "not JSON" }
            do {
                _ = try SubscriptionFilters.parse(value)
                return nil
            } catch {
                return error.description
            }
        }
        XCTAssertNil(error(#"{"keys":["a","b"],"events":["added","removed"]}"#))
        XCTAssertNil(error(#"{}"#))
        XCTAssertEqual(error(#"[]"#), #"'filters' must be an object: {"keys": [...], "events": [...]}"#)
        XCTAssertEqual(error(#"{"key":["a"]}"#), "'filters' has an unknown member 'key': use keys and events")
        XCTAssertEqual(error(#"{"keys":[]}"#), "'filters.keys' must not be empty (leave it out to be woken for every child)")
        XCTAssertEqual(error(#"{"keys":"a"}"#), "'filters.keys' must be an array of strings")
        XCTAssertEqual(error(#"{"keys":[1]}"#), "'filters.keys' must be an array of strings")
        XCTAssertEqual(error(#"{"keys":["a","a"]}"#), "'filters.keys' lists 'a' twice")
        XCTAssertEqual(error(#"{"keys":["a/b"]}"#), "'filters.keys' key 'a/b' is not a child key (empty, or holds / . $ # [ ] or a control character)")
        XCTAssertNotNil(error(#"{"keys":[""]}"#))
        XCTAssertNotNil(error(#"{"keys":["a.b"]}"#))
        XCTAssertNotNil(error(#"{"keys":["a\u0001"]}"#))
        let many = (0...SubscriptionFilters.maximumKeys).map { "\"k\($0)\"" }.joined(separator: ",")
        XCTAssertEqual(error(#"{"keys":[\#(many)]}"#), "'filters.keys' lists 33 keys: at most 32")
        let long = String(repeating: "x", count: SubscriptionFilters.maximumKeyUTF8Length + 1)
        XCTAssertEqual(
            error(#"{"keys":["\#(long)"]}"#), "'filters.keys' key '\(long.prefix(64))' is longer than 256 bytes")
        XCTAssertNil(error(#"{"keys":["\#(long.dropFirst())"]}"#))
        XCTAssertEqual(error(#"{"events":[]}"#), "'filters.events' must not be empty (leave it out to be woken for every kind)")
        XCTAssertEqual(error(#"{"events":["moved"]}"#), "'filters.events' holds 'moved': use an array of added, changed, removed")
        XCTAssertEqual(error(#"{"events":"added"}"#), "'filters.events' holds '': use an array of added, changed, removed")
        XCTAssertEqual(error(#"{"events":["added","added"]}"#), "'filters.events' lists 'added' twice")
        // events only in childEvent mode.
        let events = try SubscriptionFilters(events: [.added])
        XCTAssertNoThrow(try events.check(mode: .childEvent))
        XCTAssertThrowsError(try events.check(mode: .value)) { error in
            XCTAssertEqual((error as? FilterError)?.description, "'filters.events' applies to childEvent mode only, not value: leave it out")
        }
        XCTAssertThrowsError(try events.check(mode: .noData))
        XCTAssertNoThrow(try SubscriptionFilters(keys: ["a"]).check(mode: .noData))
    }

    func testKeysAreSortedByBytesAndWrittenBack() throws {
        // "Z" < "a" < "é" by UTF-8 bytes; the Kelvin sign is another key than "K".
        let filters = try SubscriptionFilters.parse(try json(#"{"events":["removed","added"],"keys":["é","a","Z","\u212A","K"]}"#))
        XCTAssertEqual(filters.keys, ["K", "Z", "a", "é", "\u{212A}"])
        XCTAssertEqual(filters.events, [.added, .removed])
        XCTAssertEqual(
            String(decoding: JSONWriter.bytes(filters.json), as: UTF8.self),
            "{\"events\":[\"added\",\"removed\"],\"keys\":[\"K\",\"Z\",\"a\",\"é\",\"\u{212A}\"]}")
        XCTAssertEqual(try SubscriptionFilters.parse(filters.json), filters)
        XCTAssertTrue(filters.lists("K"))
        XCTAssertTrue(filters.lists("\u{212A}"))
        XCTAssertFalse(filters.lists("b"))
        // Empty filters are stored as none.
        var settings = SubscriptionSettings(mode: .noData, expiresAt: 1)
        settings.filters = try SubscriptionFilters.parse(try json("{}"))
        XCTAssertNil(settings.filters)
    }

    // MARK: Admission

    func testAdmitsByListedKeysAndKinds() throws {
        let known = ChildTouch(changes: ChildChanges(added: ["a": .number("1")], removed: ["r"], changed: ["c": .number("2")]))
        XCTAssertTrue(try SubscriptionFilters(keys: ["a"]).admits(known))
        XCTAssertTrue(try SubscriptionFilters(keys: ["r"]).admits(known))
        XCTAssertFalse(try SubscriptionFilters(keys: ["x", "y"]).admits(known))
        XCTAssertTrue(try SubscriptionFilters(events: [.added]).admits(known))
        XCTAssertFalse(try SubscriptionFilters(keys: ["a"], events: [.changed, .removed]).admits(known))
        XCTAssertTrue(try SubscriptionFilters(keys: ["a", "c"], events: [.changed]).admits(known))
        XCTAssertTrue(try SubscriptionFilters(keys: ["r"], events: [.removed]).admits(known))
        // Nothing changed: no filter passes.
        XCTAssertFalse(try SubscriptionFilters(keys: ["a"]).admits(ChildTouch(changes: ChildChanges())))
        XCTAssertFalse(try SubscriptionFilters(events: [.added]).admits(ChildTouch(changes: ChildChanges())))
        // Kinds unknown (the old value is not known): any kind counts for a touched listed key.
        let unknownKind = ChildTouch(changes: ChildChanges(changed: ["a": .bool(true)]), keysOnly: true)
        XCTAssertTrue(try SubscriptionFilters(keys: ["a"], events: [.removed]).admits(unknownKind))
        XCTAssertFalse(try SubscriptionFilters(keys: ["b"]).admits(unknownKind))
        // Children may have been removed unseen: a listed key absent from the new value passes, if removals count.
        let incomplete = ChildTouch(changes: ChildChanges(changed: ["a": .bool(true)]), keysOnly: true, complete: false)
        XCTAssertTrue(try SubscriptionFilters(keys: ["b"]).admits(incomplete))
        XCTAssertTrue(try SubscriptionFilters(events: [.removed]).admits(incomplete))
        XCTAssertFalse(try SubscriptionFilters(keys: ["b"], events: [.added, .changed]).admits(incomplete))
        XCTAssertTrue(try SubscriptionFilters(keys: ["a"], events: [.added]).admits(incomplete))
    }

    func testNarrowedChangesKeepListedKeysAndKinds() throws {
        let changes = ChildChanges(
            added: ["a": .number("1"), "b": .number("2")], removed: ["r", "s"], changed: ["c": .number("3"), "d": .number("4")])
        XCTAssertEqual(
            try SubscriptionFilters(keys: ["a", "r", "c"]).narrowed(changes, keysOnly: false),
            ChildChanges(added: ["a": .number("1")], removed: ["r"], changed: ["c": .number("3")]))
        XCTAssertEqual(
            try SubscriptionFilters(events: [.removed]).narrowed(changes, keysOnly: false), ChildChanges(removed: ["r", "s"]))
        XCTAssertEqual(
            try SubscriptionFilters(keys: ["b", "d"], events: [.added]).narrowed(changes, keysOnly: false),
            ChildChanges(added: ["b": .number("2")]))
        // Kinds unknown: `changed` entries stay whatever the listed kinds.
        XCTAssertEqual(
            try SubscriptionFilters(keys: ["d"], events: [.added]).narrowed(changes, keysOnly: true),
            ChildChanges(changed: ["d": .number("4")]))
    }

    // MARK: Matching, per mode

    func testNoDataKeysFilterWritesBelowAtAndAbove() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/s"), subscriber: device("f"), settings: try settings(.noData, keys: ["a"]))
        index.subscribe(path: path("/s"), subscriber: device("all"), settings: try settings(.noData))
        // Below S: the child on the write's path decides.
        XCTAssertEqual(fired(index.apply(try event(.set, "/s/a/x", "1"), now: now)), ["/s#all", "/s#f"])
        XCTAssertEqual(fired(index.apply(try event(.set, "/s/b/x", "1"), now: now)), ["/s#all"])
        XCTAssertEqual(fired(index.apply(try event(.remove, "/s/b"), now: now)), ["/s#all"])
        // At S, MERGE: the children it names.
        XCTAssertEqual(fired(index.apply(try event(.merge, "/s", #"{"b":1,"c":null}"#), now: now)), ["/s#all"])
        XCTAssertEqual(fired(index.apply(try event(.merge, "/s", #"{"b":1,"a":null}"#), now: now)), ["/s#all", "/s#f"])
        // At S, SET with `before`: exact.
        XCTAssertEqual(
            fired(index.apply(try event(.set, "/s", #"{"a":1,"b":2}"#, before: #"{"a":1,"b":1}"#), now: now)), ["/s#all"])
        XCTAssertEqual(
            fired(index.apply(try event(.set, "/s", #"{"b":2}"#, before: #"{"a":1,"b":2}"#), now: now)), ["/s#all", "/s#f"])
        // At S, SET without `before` and no shadow: "a" may have been removed, the filter passes.
        XCTAssertEqual(fired(index.apply(try event(.set, "/s", #"{"b":3}"#), now: now)), ["/s#all", "/s#f"])
        // Above S: exact with `before`, else the filter passes.
        XCTAssertEqual(
            fired(index.apply(try event(.set, "/", #"{"s":{"a":1,"b":4}}"#, before: #"{"s":{"a":1,"b":3}}"#), now: now)),
            ["/s#all"])
        XCTAssertEqual(fired(index.apply(try event(.set, "/", #"{"s":{"a":1,"b":5}}"#), now: now)), ["/s#all", "/s#f"])
        // A filtered noData subscriber shares the unfiltered ones' notification.
        let both = index.apply(try event(.set, "/s/a", "9"), now: now)
        XCTAssertEqual(both.count, 1)
        XCTAssertEqual(both.first?.content, .noData)
    }

    func testValueKeysFilterKeepsTheShadowExact() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/p"), subscriber: device("f"), settings: try settings(.value, keys: ["a"]))
        _ = index.apply(try event(.snapshot, "/p", #"{"a":1,"b":1}"#), now: now)
        // A write to b fires nothing but updates the shadow.
        XCTAssertTrue(index.apply(try event(.set, "/p/b", "2"), now: now).isEmpty)
        XCTAssertEqual(index.shadow(at: path("/p")), try json(#"{"a":1,"b":2}"#))
        XCTAssertTrue(index.apply(try event(.merge, "/p", #"{"c":3}"#), now: now).isEmpty)
        // Rewriting a with its own value changes nothing: no notification.
        XCTAssertTrue(index.apply(try event(.set, "/p/a", "1"), now: now).isEmpty)
        // A write to a sends the whole value, b and c included (value content is not narrowed).
        let result = index.apply(try event(.set, "/p/a", "5"), now: now)
        XCTAssertEqual(fired(result), ["/p#f"])
        XCTAssertEqual(content(result, "f"), .value(try json(#"{"a":5,"b":2,"c":3}"#)))
        // An unfiltered subscriber at the node still gets every write, with the exact value.
        index.subscribe(path: path("/p"), subscriber: device("all"), settings: try settings(.value))
        let other = index.apply(try event(.remove, "/p/c"), now: now)
        XCTAssertEqual(fired(other), ["/p#all"])
        XCTAssertEqual(content(other, "all"), .value(try json(#"{"a":5,"b":2}"#)))
        // Above the node: the diff at the node decides.
        XCTAssertTrue(index.apply(try event(.set, "/", #"{"p":{"a":5,"b":7}}"#), now: now).allSatisfy { !$0.recipients.contains { $0.subscriber.token == "f" } })
        XCTAssertEqual(fired(index.apply(try event(.set, "/", #"{"p":{"b":7}}"#), now: now)), ["/p#all", "/p#f"])
    }

    func testChildEventFiltersNarrowDecisionAndContent() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/l"), subscriber: device("added"), settings: try settings(.childEvent, events: [.added]))
        index.subscribe(path: path("/l"), subscriber: device("added2"), settings: try settings(.childEvent, events: [.added]))
        index.subscribe(
            path: path("/l"), subscriber: device("ab"), settings: try settings(.childEvent, keys: ["a", "b"], events: [.changed, .removed]))
        index.subscribe(path: path("/l"), subscriber: device("all"), settings: try settings(.childEvent))
        _ = index.apply(try event(.snapshot, "/l", #"{"a":1,"x":1}"#), now: now)

        var result = index.apply(try event(.set, "/l", #"{"a":2,"y":1}"#), now: now)
        XCTAssertEqual(fired(result), ["/l#added", "/l#added2", "/l#all", "/l#ab"].sorted())
        XCTAssertEqual(content(result, "all"), .childEvent(ChildChanges(added: ["y": .number("1")], removed: ["x"], changed: ["a": .number("2")]), keysOnly: false))
        XCTAssertEqual(content(result, "added"), .childEvent(ChildChanges(added: ["y": .number("1")]), keysOnly: false))
        XCTAssertEqual(content(result, "ab"), .childEvent(ChildChanges(changed: ["a": .number("2")]), keysOnly: false))
        // Subscribers with the same filters share one notification; one per distinct filters, plus the unfiltered.
        XCTAssertEqual(result.count, 3)

        // A change of y only: only the unfiltered subscriber.
        result = index.apply(try event(.set, "/l/y", "2"), now: now)
        XCTAssertEqual(fired(result), ["/l#all"])
        // Removing b, which does not exist: nothing changed, no filtered subscriber fires.
        result = index.apply(try event(.remove, "/l/b"), now: now)
        XCTAssertEqual(fired(result), ["/l#all"])
        // Adding b: "added" fires, "ab" (changed, removed) does not.
        result = index.apply(try event(.set, "/l/b/c", "1"), now: now)
        XCTAssertEqual(fired(result), ["/l#added", "/l#added2", "/l#all"])
        // Removing a: "ab" fires with the removal alone.
        result = index.apply(try event(.merge, "/l", #"{"a":null,"z":1}"#), now: now)
        XCTAssertEqual(fired(result), ["/l#ab", "/l#added", "/l#added2", "/l#all"])
        XCTAssertEqual(content(result, "ab"), .childEvent(ChildChanges(removed: ["a"]), keysOnly: false))
        XCTAssertEqual(content(result, "added"), .childEvent(ChildChanges(added: ["z": .number("1")]), keysOnly: false))
        XCTAssertEqual(index.shadow(at: path("/l")), try json(#"{"b":{"c":1},"y":2,"z":1}"#))
    }

    func testChildEventFilterWithoutShadowShowsTouchedListedKeys() throws {
        let index = AppIndex(app: "app")
        index.subscribe(path: path("/n"), subscriber: device("f"), settings: try settings(.childEvent, keys: ["a"]))
        // Not seeded: the key is known, the kind is not (OnlyKeys).
        XCTAssertTrue(index.apply(try event(.set, "/n/b", "1"), now: now).isEmpty)
        let result = index.apply(try event(.set, "/n/a", "1"), now: now)
        XCTAssertEqual(content(result, "f"), .childEvent(ChildChanges(changed: ["a": .bool(true)]), keysOnly: true))
    }

    func testExpiredFilteredSubscriberIsSkipped() throws {
        let index = AppIndex(app: "app")
        var expired = try settings(.noData, keys: ["a"])
        expired.expiresAt = now
        index.subscribe(path: path("/e"), subscriber: device("old"), settings: expired)
        XCTAssertTrue(index.apply(try event(.set, "/e/a", "1"), now: now).isEmpty)
    }

    // MARK: State record and bytes

    func testFiltersSurviveTheStateRecord() throws {
        let subscription = Subscription(
            path: path("/r"), subscriber: device("t"), settings: try settings(.childEvent, keys: ["b", "a"], events: [.removed]))
        let record = SubscriptionRecord(app: "app", subscription: subscription)
        XCTAssertEqual(
            String(decoding: record.value ?? [], as: UTF8.self),
            #"{"authUID":"u","expiresAt":10000,"filters":{"events":["removed"],"keys":["a","b"]},"format":"v2","mode":"childEvent"}"#)
        let decoded = try SubscriptionRecord.decode(key: record.key, value: record.value)
        XCTAssertEqual(decoded, record)
        let index = AppIndex(app: "app")
        decoded.apply(to: index)
        XCTAssertEqual(index.subscription(path: path("/r"), subscriber: device("t"))?.filters, subscription.settings.filters)
        // Without filters nothing is written; bad filters are a bad record.
        let plain = SubscriptionRecord(
            app: "app", subscription: Subscription(path: path("/r"), subscriber: device("t"), settings: try settings(.value)))
        XCTAssertFalse(String(decoding: plain.value ?? [], as: UTF8.self).contains("filters"))
        XCTAssertThrowsError(
            try SubscriptionRecord.decode(
                key: record.key, value: Array(#"{"expiresAt":1,"format":"v2","mode":"value","filters":{"keys":[]}}"#.utf8)))
    }

    func testFilterBytesArePredictedCountedAndGivenBack() throws {
        let index = AppIndex(app: "app")
        let empty = index.byteCount
        let keys = (0..<SubscriptionFilters.maximumKeys).map { "key-of-more-than-fifteen-bytes-\($0)" }
        let filtered = try settings(.childEvent, keys: keys, events: [.added])
        let plain = try settings(.childEvent)
        XCTAssertGreaterThan(filtered.extraBytes, keys.count * 32)
        XCTAssertEqual(plain.extraBytes, 0)
        let predicted = index.bytesToSubscribe(path: path("/f"), subscriber: device("d"), settings: filtered)
        index.subscribe(path: path("/f"), subscriber: device("d"), settings: filtered)
        XCTAssertEqual(index.byteCount - empty, predicted)
        // A refresh that drops the filters gives their bytes back; one that adds them takes them again.
        index.subscribe(path: path("/f"), subscriber: device("d"), settings: plain)
        XCTAssertEqual(index.byteCount - empty, predicted - filtered.extraBytes)
        XCTAssertEqual(
            index.bytesToSubscribe(path: path("/f"), subscriber: device("d"), settings: filtered), filtered.extraBytes,
            "a refresh that adds filters reserves their bytes")
        index.subscribe(path: path("/f"), subscriber: device("d"), settings: filtered)
        XCTAssertEqual(index.byteCount - empty, predicted)
        index.unsubscribe(path: path("/f"), subscriber: device("d"))
        XCTAssertLessThan(index.byteCount - empty, 1024, "only dictionary capacity may remain")
    }
}
