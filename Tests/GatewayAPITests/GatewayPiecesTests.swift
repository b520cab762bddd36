import Foundation
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
