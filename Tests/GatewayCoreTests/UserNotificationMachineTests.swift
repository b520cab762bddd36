import CompactJSON
import GatewayCore
import PushCore
import XCTest

/// ``PartitionMachine/notifyUser(_:now:eventTime:ticket:v1Payload:)``: one notification per device of the uid,
/// holding the record's ticket, in the device's format; nothing for a replica that does not own the partition.
final class UserNotificationMachineTests: XCTestCase {
    typealias Rig = PartitionRig

    func testOneNotificationPerDeviceHoldingTheTicket() throws {
        var rig = Rig.owner()
        let index = rig.machine.contents.app(Rig.app).index
        func add(_ path: String, _ token: String, _ uid: String, _ format: NotificationFormat, expiresAt: Int64 = 10_000) throws {
            index.subscribe(
                path: try DataPath(path), subscriber: SubscriberKey(token: token, uid: uid),
                settings: SubscriptionSettings(mode: .noData, format: format, expiresAt: expiresAt, authUID: uid))
        }
        try add("/a", "phone", "alice", .v2)
        try add("/b", "phone", "alice", .v2)
        try add("/a", "tablet", "alice", .v1)
        try add("/a", "old", "alice", .v1, expiresAt: 500)
        try add("/a", "other", "bob", .v2)
        let message = UserMessage(data: .object(["m": .string("hi")]), eventID: "e1")
        var v1Builds = 0
        let (count, actions) = rig.machine.notifyUser(
            UserNotification(app: Rig.app, uid: "alice", message: message), now: 1_000, eventTime: nil, ticket: 7
        ) { _, _, _ in
            v1Builds += 1
            return Array("v1".utf8)
        }
        XCTAssertEqual(count, 2, "the phone once, the tablet once; the expired subscription is skipped")
        XCTAssertEqual(v1Builds, 1)
        guard actions.count == 2, case .retainTicket(7, count: 2) = actions[0], case .deliver(let queued) = actions[1] else {
            return XCTFail("\(actions)")
        }
        XCTAssertEqual(queued.map(\.subscriber.token), ["phone", "tablet"])
        XCTAssertEqual(queued.map(\.format), [.v2, .v1])
        XCTAssertEqual(queued.map(\.content), [.user(message), .user(message)])
        XCTAssertEqual(queued.map(\.holds), [[7], [7]])
        XCTAssertEqual(queued[1].payload, Array("v1".utf8))

        let none = rig.machine.notifyUser(
            UserNotification(app: Rig.app, uid: "nobody", message: message), now: 1_000, eventTime: nil, ticket: 8) { _, _, _ in nil }
        XCTAssertEqual(none.notifications, 0)
        XCTAssertTrue(none.actions.isEmpty)
        let unknownApp = rig.machine.notifyUser(
            UserNotification(app: "nope", uid: "alice", message: message), now: 1_000, eventTime: nil, ticket: 9) { _, _, _ in nil }
        XCTAssertTrue(unknownApp.actions.isEmpty)
    }

    func testANotOwnerSendsNothing() {
        var machine = PartitionMachine(role: .loading)
        let result = machine.notifyUser(
            UserNotification(app: "toto", uid: "alice", message: UserMessage(data: .object([:]), eventID: "e")), now: 0,
            eventTime: nil, ticket: 1) { _, _, _ in nil }
        XCTAssertTrue(result.actions.isEmpty)
    }
}
