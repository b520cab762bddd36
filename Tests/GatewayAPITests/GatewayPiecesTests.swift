import Foundation
import Providers
import PushCore
import XCTest
import Yams

@testable import Gateway

final class GatewayPiecesTests: XCTestCase {
    func testMassFailureGuard() {
        var guardrail = MassFailureGuard()
        // Nothing reached yet (a wrong app id fails every device): not credible.
        for device in 0..<5 { guardrail.record(token: "d\(device)", invalid: true, now: 100) }
        XCTAssertFalse(guardrail.singleDeviceFailureIsCredible(now: 100))
        // The same devices are reached later: one invalid among many reached is credible.
        for device in 0..<5 { guardrail.record(token: "d\(device)", invalid: false, now: 110) }
        guardrail.record(token: "d0", invalid: true, now: 120)
        XCTAssertTrue(guardrail.singleDeviceFailureIsCredible(now: 120))
        // Outside the window, the successes no longer count.
        XCTAssertFalse(guardrail.singleDeviceFailureIsCredible(now: 120 + MassFailureGuard.window + 20))
    }

    /// A sender that only names its provider project (``AppProfile/pace(for:)`` asks nothing else).
    private struct ProjectSender: PushSender {
        let provider: String
        let project: String
        func send(token: String, payload: [UInt8]) async -> DeliveryOutcome { .sent }
    }

    func testEachProviderProjectIsPacedAtItsQuotaSetting() throws {
        let defaults = try YAMLDecoder().decode(AppSettings.self, from: "hms: {appId: \"1\", clientId: \"1\", clientSecret: \"s\"}")
        XCTAssertEqual(defaults.fcm.maxSendsPerMinute, 600_000, "FCM's default quota")
        XCTAssertEqual(defaults.hms?.maxSendsPerSecond, 0, "no public HMS default: unpaced")
        let settings = try YAMLDecoder().decode(
            AppSettings.self,
            from: """
                fcm: {maxSendsPerMinute: 1200}
                hms: {appId: "1", clientId: "1", clientSecret: "s", maxSendsPerSecond: 50}
                """)
        let senders: [SubscriberKind: any PushSender] = [
            .mobile: ProjectSender(provider: "fcm", project: "fcm:p"), .huawei: ProjectSender(provider: "hms", project: "hms:1"),
            .webhook: ProjectSender(provider: "webhook", project: "webhook:toto"),
        ]
        func profile(_ settings: AppSettings, _ senders: [SubscriberKind: any PushSender]) -> AppProfile {
            AppProfile(
                name: "toto", settings: settings, verifier: nil, rules: .allowAll, rulesFingerprint: "", encryption: nil,
                senders: senders, fcmAccountFingerprint: nil)
        }
        let paced = profile(settings, senders)
        XCTAssertEqual(paced.pace(for: .mobile), DeliveryQueue.Pace.quota(key: "fcm:p", sends: 1200, per: 60))
        XCTAssertEqual(paced.pace(for: .huawei), DeliveryQueue.Pace.quota(key: "hms:1", sends: 50, per: 1))
        XCTAssertNil(paced.pace(for: .webhook), "webhooks have their own limits")
        XCTAssertNil(profile(defaults, senders).pace(for: .huawei))
        XCTAssertNil(profile(settings, [.mobile: ConsoleSink(app: "toto")]).pace(for: .mobile), "the console sink is not paced")
        // What the delivery queue grants together: the project's rate (when paced) and a place of its requests in
        // flight (fcm.maxInFlightPerProject, per project); the console sink needs nothing.
        let limited = AppProfile(
            name: "toto", settings: settings, verifier: nil, rules: .allowAll, rulesFingerprint: "", encryption: nil,
            senders: senders, fcmAccountFingerprint: nil, maxInFlightPerProject: 7)
        let fcmPace = try XCTUnwrap(paced.pace(for: .mobile))
        XCTAssertEqual(
            limited.admissions(for: SubscriberKey(kind: .mobile, token: "t")),
            [.rate(fcmPace), .concurrency(DeliveryQueue.Gate(key: "fcm:p", limit: 7))])
        XCTAssertEqual(
            profile(defaults, senders).admissions(for: SubscriberKey(kind: .huawei, token: "t")),
            [.concurrency(DeliveryQueue.Gate(key: "hms:1", limit: 200))], "unpaced: the in-flight limit only")
        XCTAssertEqual(profile(settings, [.mobile: ConsoleSink(app: "toto")]).admissions(for: SubscriberKey(kind: .mobile, token: "t")), [])
        // Negative values are refused, the field named.
        var bad = settings
        bad.fcm.maxSendsPerMinute = -1
        XCTAssertThrowsError(try bad.validate()) { XCTAssertTrue("\($0)".contains("fcm.maxSendsPerMinute"), "\($0)") }
        bad = settings
        bad.hms?.maxSendsPerSecond = -1
        XCTAssertThrowsError(try bad.validate()) { XCTAssertTrue("\($0)".contains("hms.maxSendsPerSecond"), "\($0)") }
    }

    func testAppSettingsFileDecoding() throws {
        let yaml = """
            enabled: false
            subscriptionTTLSeconds: 60
            shadowMaxBytes: 1000
            authKeys:
              - {alg: HS256, kid: k1, secret: "0123456789abcdef0123456789abcdef"}
            encryption:
              active: k1
              keys:
                - {kty: oct, kid: k1, alg: A256KW, k: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"}
            rules:
              rules:
                users:
                  $uid:
                    .read: "auth != null && auth.uid == $uid"
            hms: {appId: "1", clientId: "1", clientSecret: "s"}
            """
        let settings = try YAMLDecoder().decode(AppSettings.self, from: yaml)
        XCTAssertFalse(settings.enabled)
        XCTAssertEqual(settings.subscriptionTTLSeconds, 60)
        XCTAssertEqual(settings.authKeys.count, 1)
        XCTAssertEqual(settings.rules?["rules"]?["users"]?["$uid"]?[".read"], .string("auth != null && auth.uid == $uid"))
        let builder = AppProfileBuilder(httpClient: nil, fcm: .init(), logger: .init(label: "test"))
        var withoutHMS = settings
        withoutHMS.hms = nil
        let profile = try builder.build(name: "toto", settings: withoutHMS, previous: nil)
        XCTAssertEqual(profile.encryption?.active?.kid, "k1")
        XCTAssertFalse(profile.rules.canRead(path: ["users", "bob"], auth: nil))
        // Bad pieces are refused with the field named.
        var bad = withoutHMS
        bad.rules = .object(["rules": .object([".read": .string("auth.uid ==")])])
        XCTAssertThrowsError(try builder.build(name: "toto", settings: bad, previous: nil)) { error in
            XCTAssertTrue("\(error)".hasPrefix("rules:"), "\(error)")
        }
        bad = withoutHMS
        bad.authKeys = [.object(["alg": .string("HS256")])]
        XCTAssertThrowsError(try builder.build(name: "toto", settings: bad, previous: nil)) { error in
            XCTAssertTrue("\(error)".hasPrefix("authKeys[0]"), "\(error)")
        }
    }
}
