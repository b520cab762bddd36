import XCTest

@testable import PushCore

final class PackedTokenTests: XCTestCase {
    private let fcmToken = "fcm-1f2e:APA91b" + String(repeating: "x", count: 140)

    func testEveryShapeOfTokenReadsBackByteForByte() {
        let tokens = [
            "", "A", "AB", "ABC", "ABCD", "ABCDE", "_", "-_-", ":", "::", "a:", ":a", "a:b:c", fcmToken,
            String(repeating: "z", count: 254) + ":tail", String(repeating: "z", count: 255) + ":tail",
            "https://hooks.example/x\ncontext", "endpoint\np256dh\nauth", "caf\u{E9}", "cafe\u{301}", "\u{212A}ate",
            "with space", String(repeating: "Q", count: 0xFFE), String(repeating: "Q", count: 0xFFF),
            String(repeating: "Q", count: 0x7FFF), String(repeating: "é", count: 0x8000),
        ]
        for token in tokens {
            for kind in SubscriberKind.allCases {
                let packed = PackedToken.make(token, kind: kind)
                XCTAssertEqual(packed.string.utf8.count, token.utf8.count, "length of \(token.prefix(20))")
                XCTAssertTrue(packed.string.bytesEqual(token), "bytes of \(token.prefix(20))")
                XCTAssertEqual(packed.utf8Count, token.utf8.count)
                XCTAssertEqual(packed.kind, kind)
            }
        }
    }

    /// Base64url text of every length up to 300 with its colon anywhere (or none): the 4-to-3 groups and the
    /// character-at-a-time path meet at every offset.
    func testPackedTokensOfEveryLengthAndColonReadBack() {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var generator = SystemRandomNumberGenerator()
        for length in 1...300 {
            var characters = (0..<length).map { _ in alphabet.randomElement(using: &generator) ?? "A" }
            let plain = String(characters)
            XCTAssertTrue(PackedToken.make(plain).string.bytesEqual(plain), plain)
            let colon = Int.random(in: 0..<length, using: &generator)
            characters[colon] = ":"
            let withColon = String(characters)
            let packed = PackedToken.make(withColon)
            XCTAssertTrue(packed.string.bytesEqual(withColon), withColon)
            XCTAssertEqual(packed.storedCount < withColon.utf8.count || length < 8, colon < 255, withColon)
        }
    }

    func testEqualityAndHashingFollowTheBytes() {
        // Canonically equivalent but different bytes: two tokens. Same characters, colon elsewhere: two tokens.
        let pairs: [(String, String)] = [
            ("Kate", "\u{212A}ate"), ("caf\u{E9}", "cafe\u{301}"), ("ab:c", "a:bc"), ("A", "AA"), ("abc:", "abc"),
            (fcmToken, fcmToken + "x"), ("a\nb", "a\nc"),
        ]
        for (left, right) in pairs {
            XCTAssertNotEqual(PackedToken.make(left), PackedToken.make(right), "\(left) vs \(right)")
            XCTAssertEqual(PackedToken.make(left), PackedToken.make(left))
            XCTAssertEqual(PackedToken.make(left).hashValue, PackedToken.make(left).hashValue)
        }
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("Ab0-_:\u{E9}")
        var seen: [PackedToken: String] = [:]
        for _ in 0..<5_000 {
            let length = Int.random(in: 0...7, using: &generator)
            let text = String((0..<length).map { _ in alphabet.randomElement(using: &generator) ?? "A" })
            let packed = PackedToken.make(text)
            if let earlier = seen[packed] {
                XCTAssertTrue(earlier.bytesEqual(text), "\(earlier) and \(text) stored alike")
            } else {
                seen[packed] = text
            }
        }
        let distinct = Set(seen.values.map { ExactString($0) })
        XCTAssertEqual(distinct.count, seen.count)
    }

    func testAnFCMTokenTakesThreeQuartersOfItsLength() {
        let packed = PackedToken.make(fcmToken)
        // 155 bytes: 154 characters in 6 bits (116 bytes), the colon's offset (1 byte), then the 2-byte header.
        XCTAssertEqual(packed.storedCount, 117)
        XCTAssertLessThan(packed.heapBytes, HeapCost.string(fcmToken) * 3 / 4)
        let webhook = PackedToken.make("https://hooks.example/push\nctx")
        XCTAssertEqual(webhook.storedCount, 30)
    }

    func testTheSubscriberKeysOfOneTokenAreEqual() {
        let first = SubscriberKey(token: fcmToken, uid: "u1")
        let second = SubscriberKey(token: String(decoding: Array(fcmToken.utf8), as: UTF8.self), uid: "u1")
        XCTAssertEqual(first, second)
        XCTAssertEqual(first.hashValue, second.hashValue)
        XCTAssertEqual(first.device, second.device)
        XCTAssertNotEqual(first, SubscriberKey(kind: .huawei, token: fcmToken, uid: "u1"))
        XCTAssertNotEqual(first.device, SubscriberKey(kind: .huawei, token: fcmToken, uid: "u1").device)
        XCTAssertNotEqual(first.device.hashValue, SubscriberKey(kind: .huawei, token: fcmToken).device.hashValue)
        var changed = first
        changed.token = "other"
        XCTAssertEqual(changed.token, "other")
        XCTAssertEqual(changed.kind, .mobile)
        changed.kind = .apns
        XCTAssertEqual(changed.kind, .apns)
        XCTAssertEqual(changed.token, "other")
        XCTAssertEqual(MemoryLayout<SubscriberKey>.size, 16)
    }

    /// A uid is stored packed too (8 bytes in every subscriber entry, not a string's 16), and compared by its bytes:
    /// an empty uid is none, a uid of other bytes is another identity.
    func testUIDsAreComparedByTheirBytes() {
        let plain = SubscriberKey(token: "t", uid: "user-1")
        XCTAssertEqual(plain.uid, "user-1")
        XCTAssertEqual(plain, SubscriberKey(token: "t", uid: "user-1"))
        XCTAssertEqual(plain.hashValue, SubscriberKey(token: "t", uid: "user-1").hashValue)
        XCTAssertNotEqual(plain, SubscriberKey(token: "t", uid: "user-2"))
        XCTAssertNotEqual(plain, SubscriberKey(token: "t"))
        XCTAssertNil(SubscriberKey(token: "t", uid: "").uid)
        XCTAssertEqual(SubscriberKey(token: "t", uid: ""), SubscriberKey(token: "t"))
        // Canonically equal, different bytes: two uids.
        XCTAssertNotEqual(SubscriberKey(token: "t", uid: "caf\u{E9}"), SubscriberKey(token: "t", uid: "cafe\u{301}"))
        XCTAssertEqual(SubscriberKey(token: "t", uid: "cafe\u{301}").uid?.utf8.count, 6)
        var settings = SubscriptionSettings(mode: .value, expiresAt: 1, authUID: "")
        XCTAssertEqual(settings.authUID, "", "an empty auth uid is kept apart from none")
        XCTAssertNotEqual(settings, SubscriptionSettings(mode: .value, expiresAt: 1))
        settings.authUID = "owner"
        XCTAssertEqual(settings, SubscriptionSettings(mode: .value, expiresAt: 1, authUID: "owner"))
        XCTAssertEqual(MemoryLayout<SubscriptionSettings>.size, 26)
    }

    /// Every subscription of a user shares one stored uid, and of an owner one stored auth uid, whatever copies the
    /// calls brought; the index's table keeps the stored one when a subscription goes.
    func testAUsersSubscriptionsShareOneStoredUID() throws {
        let index = AppIndex(app: "a")
        let paths = try (0..<3).map { try DataPath("/users/u/\($0)") }
        for (number, path) in paths.enumerated() {
            index.subscribe(
                path: path, subscriber: SubscriberKey(token: "device\(number)", uid: "a-uid-longer-than-fifteen"),
                settings: SubscriptionSettings(mode: .value, format: .v2, expiresAt: 1_900_000_000, authUID: "a-uid-longer-than-fifteen"))
            index.subscribe(
                path: path, subscriber: SubscriberKey(token: "v1device\(number)"),
                settings: SubscriptionSettings(mode: .value, expiresAt: 1_900_000_000, authUID: "owner-of-v1-subscriptions"))
        }
        index.unsubscribe(path: paths[0], subscriber: SubscriberKey(token: "device0", uid: "a-uid-longer-than-fifteen"))
        index.subscribe(
            path: paths[0], subscriber: SubscriberKey(token: "device9", uid: "a-uid-longer-than-fifteen"),
            settings: SubscriptionSettings(mode: .value, format: .v2, expiresAt: 1_900_000_000, authUID: "a-uid-longer-than-fifteen"))
        let all = index.allSubscriptions()
        XCTAssertEqual(all.count, 6)
        let users = all.compactMap(\.subscriber.packedUID)
        let owners = all.compactMap(\.settings.packedAuthUID)
        XCTAssertEqual(users.count, 3)
        XCTAssertEqual(owners.count, 6)
        let user = try XCTUnwrap(users.first)
        for stored in users { XCTAssertTrue(stored.isSame(as: user)) }
        for subscription in all where subscription.subscriber.packedUID != nil {
            XCTAssertTrue(try XCTUnwrap(subscription.settings.packedAuthUID).isSame(as: user), "v2: the auth uid is the uid")
        }
        let v1Owners = all.filter { $0.subscriber.packedUID == nil }.compactMap(\.settings.packedAuthUID)
        XCTAssertEqual(v1Owners.count, 3)
        for stored in v1Owners { XCTAssertTrue(stored.isSame(as: v1Owners[0])) }
        XCTAssertEqual(index.subscriptionCount(owner: "owner-of-v1-subscriptions"), 3)
        XCTAssertEqual(index.subscriptionCount(owner: "a-uid-longer-than-fifteen"), 3)
        XCTAssertEqual(index.subscriptions(ofUser: "a-uid-longer-than-fifteen").map(\.subscriber.token), ["device9", "device1", "device2"])
    }

    /// With 16-byte subscriber keys and 26-byte settings, a node with its one subscriber fits a 112-byte block (it
    /// took a 144-byte one with a string uid and auth uid, a 128-byte one with the shadow in every such node); with a
    /// seeded shadow, a 128-byte block.
    func testANodeWithOneSubscriberFitsA112ByteBlock() {
        XCTAssertEqual(AppIndex.nodeBytes + AppIndex.payloadBytes, HeapCost.block(96))
        XCTAssertEqual(AppIndex.nodeBytes + AppIndex.payloadBytes + AppIndex.seededBytes, HeapCost.block(120))
    }
}
