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

    func testADeviceThatGaveItsOwnKeyGetsTheMessageForItAlone() throws {
        var rig = Rig.owner()
        let index = rig.machine.contents.app(Rig.app).index
        // RFC 7518 Appendix C's Bob: a valid P-256 public key (the machine only carries it).
        let key = try XCTUnwrap(
            DeviceEncryption(
                algorithm: .ecdhESA256KW, kid: "phone-1",
                key: .p256(x: "weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ", y: "e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck")))
        for (path, encryption) in [("/a", nil), ("/b", key)] as [(String, DeviceEncryption?)] {
            index.subscribe(
                path: try DataPath(path), subscriber: SubscriberKey(token: "phone", uid: "alice"),
                settings: SubscriptionSettings(mode: .noData, format: .v2, expiresAt: 10_000, authUID: "alice", encryption: encryption))
        }
        let message = UserMessage(data: .object(["m": .string("hi")]), eventID: "e1")
        let (count, actions) = rig.machine.notifyUser(
            UserNotification(app: Rig.app, uid: "alice", message: message), now: 1_000, eventTime: nil, ticket: 7) { _, _, _ in nil }
        XCTAssertEqual(count, 1, "one device")
        guard case .deliver(let queued)? = actions.last else { return XCTFail("\(actions)") }
        XCTAssertEqual(queued.map(\.encryption), [key], "never the app's key for a device that gave its own")
        XCTAssertEqual(queued.map(\.path.description), ["/b"], "in the line of the subscription that carries the key")
    }

    func testAv1PayloadIsBuiltOncePerSizeLimit() throws {
        var rig = Rig.owner()
        let index = rig.machine.contents.app(Rig.app).index
        let browser = SubscriberKey.webPush(endpoint: "https://push.example.net/x", p256dh: "k", auth: "a", uid: "alice")
        for (path, subscriber) in [("/a", SubscriberKey(token: "phone", uid: "alice")), ("/a", browser), ("/b", SubscriberKey(token: "tablet", uid: "alice"))] {
            index.subscribe(
                path: try DataPath(path), subscriber: subscriber,
                settings: SubscriptionSettings(mode: .noData, format: .v1, expiresAt: 10_000, authUID: "alice"))
        }
        var builds: [SubscriberKind] = []
        let (count, actions) = rig.machine.notifyUser(
            UserNotification(app: Rig.app, uid: "alice", message: UserMessage(data: .object([:]), eventID: "e1")), now: 1_000,
            eventTime: nil, ticket: 7
        ) { _, subscriber, _ in
            builds.append(subscriber.kind)
            return Array(subscriber.kind.rawValue.utf8)
        }
        XCTAssertEqual(count, 3)
        XCTAssertEqual(builds.sorted { $0.rawValue < $1.rawValue }, [.mobile, .webpush], "FCM's limit once, Web Push's once")
        guard case .deliver(let queued)? = actions.last else { return XCTFail("\(actions)") }
        for notification in queued {
            XCTAssertEqual(notification.payload, Array(notification.subscriber.kind.rawValue.utf8))
        }
    }

    func testANotOwnerSendsNothing() {
        var machine = PartitionMachine(role: .loading)
        let result = machine.notifyUser(
            UserNotification(app: "toto", uid: "alice", message: UserMessage(data: .object([:]), eventID: "e")), now: 0,
            eventTime: nil, ticket: 1) { _, _, _ in nil }
        XCTAssertTrue(result.actions.isEmpty)
    }
}
