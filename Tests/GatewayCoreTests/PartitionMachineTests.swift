import CompactJSON
import GatewayCore
import PushCore
import XCTest

/// Sequences of inputs into one partition's state machine, and the actions they must return: the rules of
/// SPEC §3 (durable, acknowledged writes; one answer per subscription at a time) and §8 (order, the revocation
/// point, the revoke last), the takeover, fencing, and the repairs of failed writes. No Kafka, no threads.
final class PartitionMachineTests: XCTestCase {
    typealias Rig = PartitionRig

    // MARK: Writes

    func testAnAPIWriteAppliesAndAnswersOnlyOnceStored() throws {
        var rig = Rig.owner()
        try rig.subscribe("create", path: "/x", device: "d1")
        XCTAssertFalse(rig.isSubscribed(path: "/x", device: "d1"), "nothing applies before the broker stored it")
        XCTAssertEqual(rig.pendingRecords.count, 1)
        XCTAssertEqual(rig.unacknowledged.first?.record.tag, Rig.tag, "every record carries the owner's tag")
        XCTAssertTrue(rig.drain().isEmpty, "no answer before the acknowledgement")
        rig.store()
        XCTAssertTrue(rig.isSubscribed(path: "/x", device: "d1"))
        XCTAssertEqual(rig.drain(), [.settle("create", stored: true, maybeStored: false)])
    }

    func testDecisionsAboutOneSubscriptionAreMadeOneAfterTheOther() throws {
        var rig = Rig.owner()
        try rig.subscribe("first", path: "/x", device: "d1")
        let key = Rig.key(path: "/x", device: "d1")
        XCTAssertEqual(rig.machine.admission(identity: key), .busy, "a second create waits: 201 then 409, never 201 twice")
        XCTAssertEqual(rig.machine.admission(identity: Rig.key(path: "/y", device: "d1")), .open, "another subscription does not wait")
        XCTAssertTrue(rig.machine.waitForWrites(of: key, callback: "second"))
        rig.store()
        XCTAssertEqual(rig.drain(), [.resume("second", true), .settle("first", stored: true, maybeStored: false)])
        XCTAssertEqual(rig.machine.admission(identity: key), .open)
        XCTAssertFalse(rig.machine.waitForWrites(of: key, callback: "third"), "nothing in flight: nothing to wait for")
    }

    func testWritesApplyInProduceOrderWhateverOrderTheyAreAcknowledgedIn() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/a", device: "d1")
        try rig.subscribe("b", path: "/b", device: "d1")
        let (first, second) = (rig.unacknowledged[0], rig.unacknowledged[1])
        rig.unacknowledged = []
        rig.log += [first.record, second.record]
        rig.take(rig.machine.writeAcknowledged(second.sequence, .success(2), uptime: 10))
        XCTAssertFalse(rig.isSubscribed(path: "/b", device: "d1"), "the later write waits for the earlier one")
        XCTAssertTrue(rig.drain().isEmpty)
        rig.take(rig.machine.writeAcknowledged(first.sequence, .success(1), uptime: 11))
        XCTAssertTrue(rig.isSubscribed(path: "/a", device: "d1") && rig.isSubscribed(path: "/b", device: "d1"))
        XCTAssertEqual(rig.drain(), [.settle("a", stored: true, maybeStored: false), .settle("b", stored: true, maybeStored: false)])
    }

    func testANotOwnerDecidesNothing() {
        var machine = PartitionMachine(role: .standby)
        XCTAssertEqual(machine.admission(identity: nil), .notOwner)
        machine.setRole(.releasing)
        XCTAssertEqual(machine.admission(identity: nil), .notOwner)
        XCTAssertEqual(machine.confirmOwnership(after: 0, timeout: 5, callback: "read", uptime: 1), [.resume("read", false)])
    }

    // MARK: Failed writes

    func testAFailedCreateIsAnsweredNoAndTheLogIsRepairedFromMemory() throws {
        var rig = Rig.owner()
        try rig.subscribe("create", path: "/x", device: "d1")
        rig.fail()
        let key = Rig.key(path: "/x", device: "d1")
        XCTAssertEqual(
            rig.drain(),
            [
                .writeFailed(WriteFailure(code: "x", message: "refused", maybeStored: false)),
                .schedule(.repair(key, delay: 0.5), after: 0.5), .settle("create", stored: false, maybeStored: false),
            ])
        XCTAssertFalse(rig.isSubscribed(path: "/x", device: "d1"))
        // The repair writes what memory holds: nothing, so a tombstone (the failed record may be in the log after all).
        rig.fire(.repair(key, delay: 0.5))
        XCTAssertEqual(rig.pendingRecords, [.subscription(.deletion(app: Rig.app, path: key.path, subscriber: key.subscriber))])
        // It fails too: the next attempt waits twice as long.
        rig.fail()
        XCTAssertEqual(rig.drain().last, .schedule(.repair(key, delay: 1), after: 1))
        rig.fire(.repair(key, delay: 1))
        rig.store()
        XCTAssertTrue(rig.drain().isEmpty, "stored: the chain ends")
    }

    func testAWriteThatTimedOutAfterBeingSentIsAnsweredMaybeStored() throws {
        var rig = Rig.owner()
        try rig.subscribe("create", path: "/x", device: "d1")
        rig.fail(maybeStored: true)
        XCTAssertEqual(rig.drain().last, .settle("create", stored: false, maybeStored: true), "504: neither done nor not done")
    }

    func testARepairWaitsForALaterWriteOfTheSameSubscription() throws {
        var rig = Rig.owner()
        let key = Rig.key(path: "/x", device: "d1")
        try rig.subscribe("create", path: "/x", device: "d1")
        rig.fail()
        _ = rig.drain()
        try rig.subscribe("again", path: "/x", device: "d1")
        // A repair written now, from memory (nothing), would land after the new create and undo it.
        rig.fire(.repair(key, delay: 0.5))
        XCTAssertTrue(rig.pendingRecords.count == 1, "no repair produced while the create is in flight")
        XCTAssertEqual(rig.drain(), [.schedule(.repair(key, delay: 0.5), after: 0.5)])
        rig.store()
        rig.fire(.repair(key, delay: 0.5))
        let subscription = try Rig.subscription(path: "/x", device: "d1")
        XCTAssertEqual(rig.pendingRecords, [.subscription(SubscriptionRecord(app: Rig.app, subscription: subscription))], "memory, once applied")
    }

    func testRepairsOfOneSubscriptionAreOneChain() throws {
        var rig = Rig.owner()
        let key = Rig.key(path: "/x", device: "d1")
        XCTAssertEqual(rig.machine.scheduleRepair(key, delay: 0.5), [.schedule(.repair(key, delay: 0.5), after: 0.5)])
        XCTAssertEqual(rig.machine.scheduleRepair(key, delay: 0.5), [], "merged into the pending one")
    }

    // MARK: Decisions about several subscriptions (a token replacement)

    func testADecisionAboutSeveralSubscriptionsWaitsForTheWritesOfEachOfThem() throws {
        var rig = Rig.owner()
        try rig.subscribe("old", path: "/a", device: "old")
        rig.storeAll()
        // A create on the new token is in flight: not in the index yet, but the decision must see it.
        try rig.subscribe("create", path: "/b", device: "new")
        _ = rig.drain()
        let concerns: (RetryKey) -> Bool = { $0.subscriber.token == "old" || $0.subscriber.token == "new" }
        XCTAssertEqual(rig.machine.admission(concerning: concerns), .busy)
        XCTAssertEqual(rig.machine.admission(concerning: { $0.subscriber.token == "other" }), .open, "other devices do not wait")
        XCTAssertTrue(rig.machine.waitForWrites(concerning: concerns, callback: "replace"))
        rig.store()
        XCTAssertEqual(rig.drain(), [.resume("replace", true), .settle("create", stored: true, maybeStored: false)])
        XCTAssertEqual(rig.machine.admission(concerning: concerns), .open)
        XCTAssertFalse(rig.machine.waitForWrites(concerning: concerns, callback: "again"), "nothing in flight: nothing to wait for")

        // The decision: the create on the new token first, then the old one's tombstone; one answer per record.
        let moved = try Rig.subscription(path: "/a", device: "new")
        rig.clock += 1
        rig.take(
            rig.machine.decided(
                [
                    .subscription(SubscriptionRecord(app: Rig.app, subscription: moved)),
                    .subscription(.deletion(app: Rig.app, path: moved.path, subscriber: SubscriberKey(token: "old"))),
                ], callback: "replace", uptime: rig.clock))
        XCTAssertEqual(rig.machine.admission(concerning: concerns), .busy, "a second replacement waits for this one")
        rig.store()
        XCTAssertTrue(
            rig.isSubscribed(path: "/a", device: "new") && rig.isSubscribed(path: "/a", device: "old"),
            "between the two, an event reaches both tokens, never neither")
        rig.store()
        XCTAssertTrue(rig.isSubscribed(path: "/a", device: "new") && !rig.isSubscribed(path: "/a", device: "old"))
        XCTAssertEqual(
            rig.drain(), [.settle("replace", stored: true, maybeStored: false), .settle("replace", stored: true, maybeStored: false)])
    }

    func testAReplacementWhoseTombstoneFailsIsRepairedFromMemory() throws {
        var rig = Rig.owner()
        try rig.subscribe("old", path: "/a", device: "old")
        rig.storeAll()
        _ = rig.drain()
        let moved = try Rig.subscription(path: "/a", device: "new")
        let oldKey = Rig.key(path: "/a", device: "old")
        rig.take(
            rig.machine.decided(
                [
                    .subscription(SubscriptionRecord(app: Rig.app, subscription: moved)),
                    .subscription(.deletion(app: Rig.app, path: oldKey.path, subscriber: oldKey.subscriber)),
                ], callback: "replace", uptime: rig.clock))
        rig.store()
        rig.fail()
        XCTAssertEqual(
            rig.drain(),
            [
                .settle("replace", stored: true, maybeStored: false),
                .writeFailed(WriteFailure(code: "x", message: "refused", maybeStored: false)),
                .schedule(.repair(oldKey, delay: 0.5), after: 0.5), .settle("replace", stored: false, maybeStored: false),
            ], "the call fails (503): one of its records was not stored")
        XCTAssertTrue(rig.isSubscribed(path: "/a", device: "new") && rig.isSubscribed(path: "/a", device: "old"))
        // The log is repaired to what memory holds: the old subscription still live (a repeated call removes it).
        rig.fire(.repair(oldKey, delay: 0.5))
        let old = try Rig.subscription(path: "/a", device: "old")
        XCTAssertEqual(rig.pendingRecords, [.subscription(SubscriptionRecord(app: Rig.app, subscription: old))])
    }

    // MARK: Events, order, the revocation point

    func testAnEventsNotificationsAreQueuedInOrderAndHoldItsTicketUntilSettled() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        try rig.subscribe("b", path: "/x", device: "d2", mode: .value)
        rig.storeAll()
        _ = rig.drain()
        let event = ChangeEvent(app: Rig.app, path: try DataPath("/x"), operation: .set, after: try JSONParser.parse("1"))
        let (outcome, actions) = rig.machine.match(event, offset: 7, shadowLimit: 1 << 20, now: 1_000, eventTime: nil, ticket: 42, uptime: 50) {
            _, _, _ in [0x7b, 0x7d]
        }
        XCTAssertEqual(outcome, EventOutcome(notifications: 2, afterOffset: -1))
        // The ticket is retained before anything can release it: two notifications and the shadow checkpoint.
        guard actions.count == 3, case .retainTicket(42, 3) = actions[0], case .deliver(let queued) = actions[1],
            case .produce(_, let key, _, _) = actions[2]
        else { return XCTFail("\(actions)") }
        XCTAssertEqual(Set(queued.map(\.subscriber.token)), ["d1", "d2"])
        XCTAssertTrue(queued.allSatisfy { $0.holds == [42] })
        XCTAssertEqual(key, ShadowRecord(app: Rig.app, path: try DataPath("/x"), value: .null).key)
        rig.take([actions[2]])
        rig.store()
        XCTAssertEqual(rig.drain(), [.releaseTicket(42)], "the checkpoint stored: its hold on the event is released")
    }

    func testAFailedShadowCheckpointIsWrittenAgainWithTheNodesDataThen() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1", mode: .value)
        rig.storeAll()
        _ = rig.drain()
        try rig.match("/x", "1", offset: 0, ticket: 1)
        _ = rig.drain()
        rig.fail()
        let path = try DataPath("/x")
        XCTAssertEqual(rig.drain().last, .schedule(.checkpoint(app: Rig.app, path: path, ticket: 1, delay: 1), after: 1))
        try rig.match("/x", "2", offset: 1, ticket: 2)
        rig.store()
        _ = rig.drain()
        rig.fire(.checkpoint(app: Rig.app, path: path, ticket: 1, delay: 1))
        XCTAssertEqual(rig.pendingRecords, [.shadow(ShadowRecord(app: Rig.app, path: path, value: .number("2")))], "the node's data now")
        rig.store()
        XCTAssertEqual(rig.drain(), [.releaseTicket(1)], "the first event's offset may move only now")
    }

    func testTheRevocationPointSplitsEventsAndTheRevokeIsTheLastMessage() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        rig.storeAll()
        try rig.match("/x", "1", offset: 10, ticket: 1)
        let revocation = rig.machine.revoke(app: Rig.app, now: 1_000, uptime: 60) { app in
            [(.disabled, app.index.allSubscriptions())]
        }
        rig.take(revocation.actions)
        XCTAssertEqual(revocation.afterOffset, 10, "the point: after the last event matched")
        XCTAssertEqual(revocation.counts.map(\.1), [1])
        let after = try rig.match("/x", "2", offset: 11, ticket: 2)
        XCTAssertEqual(after.notifications, 0, "nothing is sent for an event after the point")
        let queued = Rig.delivered(rig.drain())
        XCTAssertEqual(queued.map(\.device), ["d1", "d1"])
        XCTAssertEqual(queued.last?.content, .revoke(.disabled), "the notification of the event before the point, then the revoke")
        XCTAssertEqual(
            rig.pendingRecords.first,
            .subscription(.revocation(app: Rig.app, subscription: try Rig.subscription(path: "/x", device: "d1"), reason: .disabled)),
            "the marker makes the pending revoke durable")
    }

    func testAnExpiredSubscriptionIsRevokedJustBeforeTheNextEventOfItsApp() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1", expiresAt: 2_000)
        rig.storeAll()
        let outcome = try rig.match("/x", "1", offset: 5, now: 2_000, ticket: 9)
        XCTAssertEqual(outcome, EventOutcome(notifications: 0, revoked: 0, expired: 1, afterOffset: -1))
        XCTAssertEqual(Rig.delivered(rig.actions).map(\.content), [.revoke(.expired)])
        XCTAssertTrue(rig.drain().contains(.retainTicket(9, count: 1)), "the marker holds the event")
    }

    func testTheTombstoneFollowsTheDeliveredRevokeUnlessTheSubscriptionWasMadeAgain() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        try rig.subscribe("b", path: "/y", device: "d1")
        rig.storeAll()
        rig.take(rig.machine.revoke(app: Rig.app, now: 1_000, uptime: 60) { app in [(.disabled, app.index.allSubscriptions())] }.actions)
        rig.storeAll()
        // /y is made again before its revoke is delivered.
        try rig.subscribe("again", path: "/y", device: "d1")
        rig.take(rig.machine.revokeDelivered(Rig.key(path: "/y", device: "d1"), uptime: 70))
        XCTAssertEqual(rig.pendingRecords.count, 1, "a write about it is in flight: no tombstone")
        rig.storeAll()
        rig.take(rig.machine.revokeDelivered(Rig.key(path: "/y", device: "d1"), uptime: 71))
        XCTAssertTrue(rig.pendingRecords.isEmpty, "made again: not revoked any more")
        XCTAssertTrue(Self.ended(rig.drain()).isEmpty, "no tombstone, no end reported")
        rig.take(rig.machine.revokeDelivered(Rig.key(path: "/x", device: "d1"), uptime: 72))
        let key = Rig.key(path: "/x", device: "d1")
        XCTAssertEqual(rig.pendingRecords, [.subscription(.deletion(app: Rig.app, path: key.path, subscriber: key.subscriber))])
        XCTAssertTrue(Self.ended(rig.drain()).isEmpty, "not before the tombstone is stored")
        rig.storeAll()
        XCTAssertEqual(
            Self.ended(rig.drain()),
            [EndedSubscription(app: Rig.app, subscription: try Rig.subscription(path: "/x", device: "d1"), cause: .revoked(.disabled))],
            "the app's event hook hears of it once the tombstone is stored")
        rig.take(rig.machine.revokeDelivered(key, uptime: 73))
        XCTAssertTrue(rig.pendingRecords.isEmpty, "once")
        XCTAssertTrue(Self.ended(rig.drain()).isEmpty, "reported once")
    }

    static func ended(_ actions: [PartitionAction]) -> [EndedSubscription] {
        actions.compactMap { action in
            if case .subscriptionEnded(let ended) = action { return ended }
            return nil
        }
    }

    func testAStaleWriteNeverBringsBackARevokedSubscription() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        rig.storeAll()
        // A refresh is produced, then the subscription is revoked before the refresh is acknowledged.
        try rig.subscribe("refresh", path: "/x", device: "d1")
        rig.take(rig.machine.revoke(app: Rig.app, now: 1_000, uptime: 60) { app in [(.disabled, app.index.allSubscriptions())] }.actions)
        rig.storeAll()
        XCTAssertFalse(rig.isSubscribed(path: "/x", device: "d1"), "the refresh was decided before the revocation point")
        XCTAssertNotNil(rig.machine.contents.revoked[Rig.key(path: "/x", device: "d1")])
    }

    func testADeadTokenDeletesTheSubscriptionWithoutARevoke() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        rig.storeAll()
        _ = rig.drain()
        let key = Rig.key(path: "/x", device: "d1")
        let answer = ProviderAnswer(provider: "fcm", httpStatus: 404, code: "UNREGISTERED", message: "Requested entity was not found.")
        rig.take(rig.machine.tokenDead(key, answer: answer, uptime: 80))
        XCTAssertFalse(rig.isSubscribed(path: "/x", device: "d1"))
        XCTAssertEqual(rig.pendingRecords, [.subscription(.deletion(app: Rig.app, path: key.path, subscriber: key.subscriber))])
        XCTAssertTrue(Rig.delivered(rig.actions).isEmpty)
        rig.storeAll()
        XCTAssertEqual(
            Self.ended(rig.drain()),
            [EndedSubscription(app: Rig.app, subscription: try Rig.subscription(path: "/x", device: "d1"), cause: .tokenDead(answer, revoking: nil))])
        // Already gone (a second answer for it): deleted again, nothing more reported.
        rig.take(rig.machine.tokenDead(key, answer: answer, uptime: 81))
        rig.storeAll()
        XCTAssertTrue(Self.ended(rig.drain()).isEmpty)
    }

    func testAnEndIsReportedWhenItsTombstoneIsStoredEvenByARepairButNotWhenTheSubscriptionIsMadeAgain() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        try rig.subscribe("b", path: "/y", device: "d1")
        rig.storeAll()
        _ = rig.drain()
        let answer = ProviderAnswer(provider: "fcm", httpStatus: 404, code: "UNREGISTERED")
        // /x: its tombstone fails; the repair (written from memory: a tombstone) reports it.
        rig.take(rig.machine.tokenDead(Rig.key(path: "/x", device: "d1"), answer: answer, uptime: 80))
        rig.fail()
        XCTAssertTrue(Self.ended(rig.actions).isEmpty)
        guard case .schedule(let timer, _)? = rig.drain().first(where: { if case .schedule = $0 { return true } else { return false } }) else {
            return XCTFail("a repair is scheduled")
        }
        rig.fire(timer)
        rig.storeAll()
        XCTAssertEqual(Self.ended(rig.drain()).map(\.subscription.path), [try DataPath("/x")])
        // /y: its tombstone fails, then it is made again before the repair: not gone, nothing reported.
        rig.take(rig.machine.tokenDead(Rig.key(path: "/y", device: "d1"), answer: answer, uptime: 90))
        rig.fail()
        try rig.subscribe("again", path: "/y", device: "d1")
        rig.storeAll()
        for action in rig.drain() { if case .schedule(let timer, _) = action { rig.fire(timer) } }
        rig.storeAll()
        XCTAssertTrue(Self.ended(rig.drain()).isEmpty)
        XCTAssertTrue(rig.isSubscribed(path: "/y", device: "d1"))
    }

    func testADeadTokenOfARevokedSubscriptionReportsTheRevocationItInterrupted() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        rig.storeAll()
        rig.take(rig.machine.revoke(app: Rig.app, now: 1_000, uptime: 60) { app in [(.permissionDenied, app.index.allSubscriptions())] }.actions)
        rig.storeAll()
        _ = rig.drain()
        let key = Rig.key(path: "/x", device: "d1")
        let answer = ProviderAnswer(provider: "hms", httpStatus: 200, code: "hms_80300007")
        rig.take(rig.machine.tokenDead(key, answer: answer, uptime: 80))
        rig.storeAll()
        XCTAssertEqual(
            Self.ended(rig.drain()),
            [
                EndedSubscription(
                    app: Rig.app, subscription: try Rig.subscription(path: "/x", device: "d1"), cause: .tokenDead(answer, revoking: .permissionDenied))
            ])
        rig.take(rig.machine.revokeDelivered(key, uptime: 81))
        XCTAssertTrue(Self.ended(rig.drain()).isEmpty, "its revoke will not be reported as well")
    }

    // MARK: Takeover

    func testATakeoverLoadsWhatTheLogHoldsAndHandsOverWhatWasLeftToDeliver() throws {
        var machine = PartitionMachine(role: .loading)
        let previous: [UInt8] = [9, 9]
        let live = try Rig.subscription(path: "/x", device: "d1", mode: .value)
        let revoked = try Rig.subscription(path: "/y", device: "d2")
        let path = try DataPath("/x")
        let line = [PendingNotification(app: Rig.app, path: path, subscriber: live.subscriber, format: .v1, content: .noData, firstFailureAt: 1)]
        let records: [StateRecord] = [
            .shadow(ShadowRecord(app: Rig.app, path: path, value: .number("5"))),
            .subscription(SubscriptionRecord(app: Rig.app, subscription: live)),
            .subscription(.revocation(app: Rig.app, subscription: revoked, reason: .expired)),
            .retry(RetryRecord(key: Rig.key(path: "/x", device: "d1"), entries: line)),
        ]
        machine.readMarker(tag: previous, offset: 0)
        for (offset, record) in records.enumerated() {
            XCTAssertTrue(machine.contents.applyFromLog(record, key: record.key, offset: Int64(offset + 1), tag: previous))
        }
        // A zombie's record after the previous owner's marker, tagged otherwise: skipped, and rewritten on promotion.
        let zombie = StateRecord.subscription(SubscriptionRecord(app: Rig.app, subscription: try Rig.subscription(path: "/z", device: "d3")))
        XCTAssertFalse(machine.contents.applyFromLog(zombie, key: zombie.key, offset: 5, tag: [7]))
        machine.willWriteMarker(tag: Rig.tag)
        machine.markerWritten(tag: Rig.tag, offset: 6, writtenAt: 100)
        machine.readMarker(tag: Rig.tag, offset: 6)
        XCTAssertEqual(machine.admission(identity: nil), .notOwner, "nothing is served from a partial state")
        let promoted = try XCTUnwrap(machine.promote(uptime: 101, now: 1_000))
        XCTAssertEqual(promoted.handover.lines, [line])
        XCTAssertEqual(
            promoted.handover.revokes.map { [$0.subscriber.token: $0.content] }, [["d2": .revoke(.expired)]], "its revoke is still to be sent")
        XCTAssertEqual(promoted.actions, [.schedule(.repair(Rig.key(path: "/z", device: "d3"), delay: 0.5), after: 0)])
        XCTAssertEqual(machine.contents.existingApp(Rig.app)?.index.shadow(at: path), .number("5"), "the checkpoint restored")
        XCTAssertEqual(machine.admission(identity: nil), .open)
        XCTAssertNil(machine.promote(uptime: 102, now: 1_000), "promoted once")
    }

    /// Issue 19: a standby follows creates and tombstones of one key, its siblings and a deeper path (the owner's
    /// acknowledged deletes, as the zombie test writes them), then takes over: what was deleted stays deleted, and
    /// a create of it is a new subscription.
    func testTombstonesFollowedInStandbyAndAtTheLoadStayDeletedAfterTheTakeover() throws {
        var machine = PartitionMachine(role: .standby)
        let previous: [UInt8] = [9, 9]
        func v2(_ path: String, _ token: String, _ uid: String) throws -> Subscription {
            Subscription(
                path: try DataPath(path), subscriber: SubscriberKey(token: token, uid: uid),
                settings: SubscriptionSettings(mode: .noData, expiresAt: 4_000_000_000, authUID: uid))
        }
        let a = try v2("/z/v2", "ta", "user1")
        let b = try v2("/z/v2", "tb", "user2")
        let deep = try v2("/z/v2/deeper/still", "tc", "user3")
        func created(_ subscription: Subscription) -> StateRecord { .subscription(SubscriptionRecord(app: Rig.app, subscription: subscription)) }
        func deleted(_ subscription: Subscription) -> StateRecord {
            .subscription(.deletion(app: Rig.app, path: subscription.path, subscriber: subscription.subscriber))
        }
        let records = [
            created(a), created(b), deleted(a), created(deep), deleted(deep), created(a), deleted(b), deleted(a), created(b), deleted(b),
        ]
        machine.readMarker(tag: previous, offset: 0)
        for (offset, record) in records.enumerated() {
            // As read back from the topic: a tombstone has no value.
            let read = try StateRecord.decode(key: record.key, value: record.value)
            XCTAssertTrue(machine.contents.applyFromLog(read, key: record.key, offset: Int64(offset + 1), tag: previous))
        }
        let index = try XCTUnwrap(machine.contents.existingApp(Rig.app)?.index)
        for subscription in [a, b, deep] {
            XCTAssertNil(index.subscription(path: subscription.path, subscriber: subscription.subscriber), "\(subscription.subscriber.token)")
        }
        XCTAssertEqual(index.subscriptionCount, 0)
        XCTAssertEqual(index.allSubscriptions(), [], "nothing is left of a deleted subscription")
        machine.setRole(.loading)
        machine.willWriteMarker(tag: Rig.tag)
        machine.markerWritten(tag: Rig.tag, offset: Int64(records.count + 1), writtenAt: 100)
        machine.readMarker(tag: Rig.tag, offset: Int64(records.count + 1))
        let promoted = try XCTUnwrap(machine.promote(uptime: 101, now: 1_000))
        XCTAssertEqual(promoted.actions, [], "nothing superseded to rewrite")
        XCTAssertEqual(index.subscriptions(ofUser: "user1"), [])
        XCTAssertEqual(index.subscribe(path: a.path, subscriber: a.subscriber, settings: a.settings), .created)
    }

    func testAPartitionGivenUpDuringItsLoadIsNotPromoted() {
        var machine = PartitionMachine(role: .loading)
        machine.setRole(.released)
        XCTAssertNil(machine.promote(uptime: 1, now: 1_000))
    }

    // MARK: Fencing

    func testAWriteLandingPastAGapWaitsForTheGapToBeReadBack() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        // Someone else wrote at offset 1: this owner's write lands at 2.
        rig.log.append(LogRecord(key: Array("other".utf8), value: [], tag: [7]))
        rig.store()
        XCTAssertEqual(rig.drain(), [.readGap(from: 1, to: 2, tag: Rig.tag, attempt: 0, after: 0)])
        XCTAssertEqual(rig.machine.confirmationStamp, 0, "not current while the gap is unknown")
        XCTAssertFalse(rig.isSubscribed(path: "/x", device: "d1"))
        // A zombie's write (an earlier owner's): rewritten from memory, and the write applies.
        let zombie = StateRecord.subscription(SubscriptionRecord(app: Rig.app, subscription: try Rig.subscription(path: "/z", device: "d3")))
        let records = [LogRecord(key: zombie.key, value: zombie.value ?? [], tag: [7])]
        rig.take(rig.machine.gapRead(from: 1, to: 2, tag: Rig.tag, attempt: 0, records: records, uptime: 200))
        XCTAssertTrue(rig.isSubscribed(path: "/x", device: "d1"))
        XCTAssertEqual(
            rig.drain(),
            [
                .zombieWritesRewritten(count: 1), .schedule(.repair(Rig.key(path: "/z", device: "d3"), delay: 0.5), after: 0),
                .settle("a", stored: true, maybeStored: false),
            ])
    }

    func testANewerOwnersMarkerInTheGapSupersedesThisReplica() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        try rig.subscribe("b", path: "/y", device: "d1")
        rig.log.append(LogRecord(key: OwnerTag.loadMarkerKey, value: [], tag: [7]))
        rig.store()
        _ = rig.drain()
        let marker = [LogRecord(key: OwnerTag.loadMarkerKey, value: [], tag: [7])]
        rig.take(rig.machine.gapRead(from: 1, to: 2, tag: Rig.tag, attempt: 0, records: marker, uptime: 200))
        let actions = rig.drain()
        XCTAssertEqual(actions.first, .superseded(gapFrom: 1, gapTo: 2), "the driver hears first, before any waiter")
        XCTAssertTrue(actions.contains(.settle("a", stored: false, maybeStored: false)))
        XCTAssertTrue(actions.contains(.settle("b", stored: false, maybeStored: false)), "later writes fail too")
        XCTAssertFalse(rig.isSubscribed(path: "/x", device: "d1"))
        XCTAssertTrue(rig.machine.isFenced)
        XCTAssertEqual(rig.machine.admission(identity: nil), .notOwner)
        XCTAssertEqual(rig.machine.contents.role, .released)
    }

    func testAnUnreadableGapIsReadAgainThenGivenUpAfterAMinute() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        rig.log.append(LogRecord(key: nil, value: [], tag: nil))
        rig.store()
        _ = rig.drain()
        XCTAssertEqual(
            rig.machine.gapRead(from: 1, to: 2, tag: Rig.tag, attempt: 0, records: nil, uptime: 1),
            [.readGap(from: 1, to: 2, tag: Rig.tag, attempt: 1, after: 1)])
        XCTAssertEqual(rig.machine.gapRead(from: 1, to: 2, tag: Rig.tag, attempt: 60, records: nil, uptime: 2).first, .superseded(gapFrom: 1, gapTo: 2))
    }

    func testAGapStillUnreadWhenTheReplicaStopsAnswersItsWritesMaybeStored() throws {
        var rig = Rig.owner()
        try rig.subscribe("a", path: "/x", device: "d1")
        try rig.subscribe("b", path: "/y", device: "d1")
        rig.log.append(LogRecord(key: nil, value: [], tag: nil))
        rig.store()
        XCTAssertEqual(rig.drain(), [.readGap(from: 1, to: 2, tag: Rig.tag, attempt: 0, after: 0)])
        // The writer closes before the gap could be read: the write behind it and the one still in flight are
        // answered "maybe stored" (the next owner reads the log), and the gap is not read again.
        rig.take(rig.machine.gapAbandoned(uptime: 2))
        let actions = rig.drain()
        XCTAssertTrue(actions.contains(.settle("a", stored: false, maybeStored: true)), "\(actions)")
        XCTAssertTrue(actions.contains(.settle("b", stored: false, maybeStored: true)), "\(actions)")
        XCTAssertFalse(actions.contains { if case .readGap = $0 { true } else { false } })
        XCTAssertFalse(actions.contains { if case .superseded = $0 { true } else { false } }, "not another owner, as far as it knows")
        XCTAssertFalse(rig.isSubscribed(path: "/x", device: "d1"), "nothing unknown is applied")
        XCTAssertEqual(rig.machine.admission(identity: nil), .notOwner)
        // A late read or acknowledgement changes nothing.
        XCTAssertEqual(rig.machine.gapRead(from: 1, to: 2, tag: Rig.tag, attempt: 1, records: [], uptime: 3), [])
        rig.storeAll()
        XCTAssertEqual(rig.drain(), [])
        XCTAssertEqual(rig.machine.gapAbandoned(uptime: 4), [], "once")
    }

    func testOwnershipIsConfirmedByAWriteProducedAfterTheQuestion() throws {
        var rig = Rig.owner()
        let asked = rig.clock + 100
        rig.clock = asked
        // Nothing in flight: an ownership check is written, and the waiter gives up after the timeout.
        rig.take(rig.machine.confirmOwnership(after: asked, timeout: 5, callback: "read", uptime: asked))
        XCTAssertEqual(rig.unacknowledged.map(\.record.key), [OwnerTag.ownerCheckKey])
        XCTAssertEqual(rig.drain(), [.schedule(.confirmationTimeout(1), after: 5)])
        rig.store()
        XCTAssertEqual(rig.drain(), [.resume("read", true)])
        rig.fire(.confirmationTimeout(1))
        XCTAssertTrue(rig.drain().isEmpty, "answered once")
        // Already confirmed after the instant: at once.
        XCTAssertEqual(rig.machine.confirmOwnership(after: asked, timeout: 5, callback: "again", uptime: rig.clock), [.resume("again", true)])
        // The check fails: another one is written shortly, and the timeout answers no.
        rig.clock += 100
        rig.take(rig.machine.confirmOwnership(after: rig.clock, timeout: 5, callback: "late", uptime: rig.clock))
        rig.fail()
        XCTAssertEqual(rig.drain().last, .schedule(.ownershipCheck, after: 0.1))
        rig.fire(.ownershipCheck)
        XCTAssertEqual(rig.unacknowledged.map(\.record.key), [OwnerTag.ownerCheckKey])
        rig.fire(.confirmationTimeout(2))
        XCTAssertEqual(rig.drain(), [.resume("late", false)])
    }

    func testDrainWaitersHearWhenNoWriteIsLeft() throws {
        var rig = Rig.owner()
        XCTAssertEqual(rig.machine.whenDrained("idle"), [.resume("idle", true)])
        try rig.subscribe("a", path: "/x", device: "d1")
        XCTAssertEqual(rig.machine.whenDrained("drain"), [])
        rig.store()
        XCTAssertTrue(rig.drain().contains(.resume("drain", true)))
    }
}
