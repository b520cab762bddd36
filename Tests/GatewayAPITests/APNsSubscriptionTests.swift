import CompactJSON
import CurlHTTP
import Foundation
import Logging
import Providers
import PushCore
import SSLCrypto
import XCTest

@testable import Gateway
@testable import GatewayAPI

/// `kind: "apns"` (issue 21): the device token read from a v2 body, the app's `apns` settings, the sender kept across
/// a reload while the credentials do not change (its provider token with it), the gateway's `apns:` configuration,
/// and the payload's limit. Delivery to APNs is tested end to end against a fake (tests/e2e/test_apns.py).
final class APNsSubscriptionTests: XCTestCase {
    private func parse(_ json: String) throws(APIError) -> V2SubscriptionRequest {
        guard case .object(let object)? = try? JSONParser.parse(Array(json.utf8)) else { fatalError("bad test JSON") }
        return try V2Routes.fullRequest(object)
    }

    func testTheDeviceTokenIsHexStoredInLowercase() throws {
        let token = String(repeating: "aB09", count: 16)
        let request = try parse(#"{"kind":"apns","path":"/a","context":"\#(token)"}"#)
        XCTAssertEqual(request.kind, .apns)
        XCTAssertEqual(request.context, token.lowercased())
        for bad in ["abc", "zz", String(repeating: "ab", count: 101), "ab cd"] {
            XCTAssertThrowsError(try parse(#"{"kind":"apns","path":"/a","context":"\#(bad)"}"#), bad)
        }
        XCTAssertThrowsError(try parse(#"{"kind":"apns","path":"/a"}"#))
    }

    private func settings(_ directory: URL) throws -> AppSettings {
        let file = directory.appendingPathComponent("AuthKey_KEY1234567.p8")
        try ECPrivateKey().pemRepresentation().write(to: file, atomically: true, encoding: .utf8)
        var settings = AppSettings()
        settings.apns = APNsSettings()
        settings.apns?.teamId = "TEAM123456"
        settings.apns?.keyId = "KEY1234567"
        settings.apns?.keyFile = file.path
        settings.apns?.bundleId = "com.example.app"
        return settings
    }

    func testTheAppsSettingsAreCheckedAndTheSenderKeptWhileTheyDoNotChange() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let http = try HTTPClient(configuration: HTTPClientConfiguration(), logger: Logger(label: "test"))
        var builder = AppProfileBuilder(httpClient: http, fcm: .init(), logger: Logger(label: "test"))
        builder.apns = APNsConfiguration(baseURL: "https://apns.test", developmentBaseURL: "https://sandbox.apns.test")
        let good = try settings(directory)
        let first = try builder.build(name: "toto", settings: good, previous: nil)
        let sender = try XCTUnwrap(first.sender(for: .apns) as? APNsSender)
        XCTAssertEqual(sender.project, "apns:TEAM123456/com.example.app")
        XCTAssertEqual(sender.client.baseURL, "https://apns.test")
        XCTAssertEqual(first.admissionScope(for: .apns), "apns:TEAM123456/com.example.app", "counted in its project, as FCM's are")
        let again = try builder.build(name: "toto", settings: good, previous: first)
        XCTAssertTrue(again.sender(for: .apns) as? APNsSender === sender, "the same credentials: the same provider token")
        var development = good
        development.apns?.environment = "development"
        let moved = try XCTUnwrap(try builder.build(name: "toto", settings: development, previous: first).sender(for: .apns) as? APNsSender)
        XCTAssertFalse(moved === sender)
        XCTAssertEqual(moved.client.baseURL, "https://sandbox.apns.test")

        for change in [
            { (s: inout APNsSettings) in s.teamId = "team123456" }, { $0.teamId = "TEAM12345" }, { $0.keyId = "" }, { $0.bundleId = "" },
            { $0.bundleId = "com.example app" }, { $0.environment = "sandbox" }, { $0.keyFile = "" },
            { $0.keyFile = directory.appendingPathComponent("none.p8").path },
        ] as [(inout APNsSettings) -> Void] {
            var copy = good
            change(&copy.apns!)
            XCTAssertThrowsError(try builder.build(name: "toto", settings: copy, previous: nil), "\(String(describing: copy.apns))")
        }
        XCTAssertNil(try builder.build(name: "toto", settings: AppSettings(), previous: nil).sender(for: .apns))
        await_shutdown(http)
    }

    private func await_shutdown(_ http: HTTPClient) {
        let done = expectation(description: "shutdown")
        Task {
            await http.shutdown()
            done.fulfill()
        }
        wait(for: [done], timeout: 10)
    }

    /// APNs answers `BadDeviceToken` or `DeviceTokenNotForTopic` to every device of an app whose environment or bundle
    /// id is wrong: believed about one device only while the app reaches others (``MassFailureGuard``).
    func testARefusalThatMayBeTheAppsSettingsRevokesOnlyWhileOtherDevicesAreReached() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let http = try HTTPClient(configuration: HTTPClientConfiguration(), logger: Logger(label: "test"))
        let profile = try AppProfileBuilder(httpClient: http, fcm: .init(), logger: Logger(label: "test"))
            .build(name: "toto", settings: try settings(directory), previous: nil)
        let sender = try XCTUnwrap(profile.sender(for: .apns) as? APNsSender)
        func refused(_ reason: String, status: Int = 400) -> DeliveryOutcome {
            .failed(DeliveryFailure(reason: reason, classification: .tokenDead, httpStatus: status))
        }
        func classification(_ outcome: DeliveryOutcome) -> ProviderClassification? {
            if case .failed(let failure) = outcome { return failure.classification }
            return nil
        }
        XCTAssertEqual(classification(sender.guarded(refused("BadDeviceToken"), token: "a", now: 1_000)), .ourFault, "nothing reached yet")
        XCTAssertEqual(classification(sender.guarded(refused("Unregistered", status: 410), token: "u", now: 1_000)), .tokenDead)
        _ = sender.guarded(.sent, token: "b", now: 1_001)
        _ = sender.guarded(.sent, token: "c", now: 1_002)
        XCTAssertEqual(classification(sender.guarded(refused("BadDeviceToken"), token: "a", now: 1_003)), .tokenDead)
        XCTAssertEqual(classification(sender.guarded(refused("DeviceTokenNotForTopic"), token: "d", now: 1_004)), .tokenDead)
        XCTAssertEqual(
            classification(sender.guarded(refused("BadDeviceToken"), token: "e", now: 1_005)), .ourFault,
            "three of five devices refused: more likely the settings")
        XCTAssertEqual(
            classification(sender.guarded(refused("BadDeviceToken"), token: "f", now: 1_003 + MassFailureGuard.window + 10)), .ourFault,
            "the reached devices are out of the window")
        await_shutdown(http)
    }

    func testTheGatewaysAPNsConfiguration() throws {
        let defaults = try GatewayConfiguration.load(file: nil, environment: [:])
        XCTAssertEqual(defaults.apns.baseURL, "https://api.push.apple.com")
        XCTAssertEqual(defaults.apns.developmentBaseURL, "https://api.sandbox.push.apple.com")
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString).yaml").path
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("apns: {baseURL: 'https://a.test', caFile: /ca.pem}".utf8)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let set = try GatewayConfiguration.load(file: path, environment: ["PUSH_APNS_DEVELOPMENT_BASE_URL": "https://d.test"])
        XCTAssertEqual(set.apns.baseURL, "https://a.test")
        XCTAssertEqual(set.apns.developmentBaseURL, "https://d.test")
        XCTAssertEqual(set.apns.caFile, "/ca.pem")
        XCTAssertThrowsError(try GatewayConfiguration.load(file: nil, environment: ["PUSH_APNS_BASE_URL": "http://a.test"]), "cleartext")
    }

    func testTheDocumentFitsAPNsPayloadAroundIt() throws {
        let profile = try AppProfileBuilder(httpClient: nil, fcm: .init(), logger: Logger(label: "test"))
            .build(name: "toto", settings: AppSettings(), previous: nil)
        let builder = PayloadBuilder(metrics: GatewayMetrics(), logger: Logger(label: "test"))
        let device = SubscriberKey(kind: .apns, token: String(repeating: "ab", count: 32), uid: "u")
        let path = try DataPath("/a")
        for length in stride(from: 3900, through: 4100, by: 3) {
            let content = NotificationContent.value(.string(String(repeating: "z", count: length)))
            for format in [NotificationFormat.v1, .v2] {
                let data = try XCTUnwrap(builder.payload(profile: profile, path: path, subscriber: device, format: format, content: content))
                let request = try APNsMessage.request(data: data, token: device.token, bundleID: "com.example.app", providerToken: "t")
                XCTAssertLessThanOrEqual(request.body.count, APNsMessage.maximumPayloadBytes, "\(length) \(format)")
            }
        }
        XCTAssertEqual(Array(#"{"aps":{"content-available":1},"data":}"#.utf8).count, 4096 - SubscriberKind.apns.maximumPayloadSize)
    }
}
