import CompactJSON
import CurlHTTP
import GatewayCore
import Foundation
import Logging
import PushCore
import PushFormats
import Providers
import SSLCrypto
import WebPush
import XCTest

@testable import Gateway
@testable import GatewayAPI

/// `kind: "webpush"` (issue 21): the browser's subscription read from a v2 body and shown back as it was given, the
/// app's `webPush` settings, the per-host gate, the payload's smaller limit, and the event hook's `context`.
final class WebPushSubscriptionTests: XCTestCase {
    private static let endpoint = "https://push.example.net/wpush/v2/gAAAA-x?y=1"
    private static let auth = Base64URL.encode(Array(repeating: UInt8(7), count: 16))

    private func browserKey() throws -> String { Base64URL.encode(try ECPrivateKey().publicKey.uncompressedPoint) }

    private func parse(_ json: String) throws(APIError) -> V2SubscriptionRequest {
        guard case .object(let object)? = try? JSONParser.parse(Array(json.utf8)) else { fatalError("bad test JSON") }
        return try V2Routes.fullRequest(object)
    }

    func testTheBrowsersSubscriptionIsReadAsAnObjectOrAStringAndStoredAsItsThreeParts() throws {
        let p256dh = try browserKey()
        let context = #"{"endpoint":"\#(Self.endpoint)","expirationTime":null,"keys":{"p256dh":"\#(p256dh)","auth":"\#(Self.auth)"}}"#
        let request = try parse(#"{"kind":"webpush","path":"/a","format":"v1","context":\#(context)}"#)
        XCTAssertEqual(request.kind, .webpush)
        XCTAssertEqual(request.format, .v1, "a browser takes v1 and v2 documents as the apps do")
        XCTAssertEqual(request.context, Self.endpoint + "\n" + p256dh + "\n" + Self.auth)
        let quoted = JSONWriter.string(.string(context))
        XCTAssertEqual(try parse(#"{"kind":"webpush","path":"/a","context":\#(quoted)}"#).context, request.context, "JSON.stringify's form too")
        let subscriber = SubscriberKey(kind: .webpush, token: try XCTUnwrap(request.context), uid: "alice")
        XCTAssertEqual(subscriber.webPushParts.map { [String($0.endpoint), String($0.p256dh), String($0.auth)] }, [Self.endpoint, p256dh, Self.auth])
        XCTAssertEqual(subscriber.destination, "")

        // Shown back as the object it was given as.
        let document = V2SubscriptionDocument(
            id: "id", uid: "alice", kind: .webpush, mode: .noData, path: try DataPath("/a"), context: try XCTUnwrap(request.context),
            expirationTimestampSeconds: 1, format: .v2)
        XCTAssertEqual(
            document.json.objectValue?["context"],
            .object(["endpoint": .string(Self.endpoint), "keys": .object(["p256dh": .string(p256dh), "auth": .string(Self.auth)])]))
    }

    func testBadSubscriptionsAreRefusedWithWhatIsWrong() throws {
        let p256dh = try browserKey()
        let bob = #"{"alg":"ECDH-ES+A256KW","jwk":{"kty":"EC","crv":"P-256","x":"weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ","y":"e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck"}}"#
        func body(endpoint: String = Self.endpoint, p256dh key: String? = nil, auth: String = Self.auth) -> String {
            #"{"kind":"webpush","path":"/a","context":{"endpoint":"\#(endpoint)","keys":{"p256dh":"\#(key ?? p256dh)","auth":"\#(auth)"}}}"#
        }
        let cases: [(String, String)] = [
            (#"{"kind":"webpush","path":"/a"}"#, "'context' (the browser's subscription"),
            (#"{"kind":"webpush","path":"/a","context":"a-token"}"#, "must be the browser's subscription"),
            (#"{"kind":"webpush","path":"/a","context":{"endpoint":"https://h.example/x"}}"#, "'context.keys'"),
            (body(endpoint: "http://push.example.net/x"), "'context.endpoint'"),
            (body(endpoint: "https://user@push.example.net/x"), "'context.endpoint'"),
            (body(p256dh: "AAAA"), "'context.keys.p256dh'"),
            // A point that is not on the curve.
            (body(p256dh: Base64URL.encode([4] + Array(repeating: 1, count: 64))), "'context.keys.p256dh'"),
            (body(auth: Base64URL.encode(Array(repeating: 1, count: 15))), "'context.keys.auth'"),
            (body(endpoint: "https://push.example.net/" + String(repeating: "x", count: 2048)), "longer than 2048"),
            (String(body().dropLast()) + #","encryption":\#(bob)}"#, "'encryption' is not for webpush"),
        ]
        for (json, message) in cases {
            XCTAssertThrowsError(try parse(json), json) { error in
                XCTAssertTrue((error as? APIError)?.message.contains(message) == true, "\(json): \(error)")
            }
        }
    }

    private func settings(_ directory: URL, urgency: String = "high") throws -> AppSettings {
        let key = try ECPrivateKey()
        let file = directory.appendingPathComponent("vapid.pem")
        try key.pemRepresentation().write(to: file, atomically: true, encoding: .utf8)
        var settings = AppSettings()
        settings.webPush = WebPushSettings()
        settings.webPush?.vapidKeyFile = file.path
        settings.webPush?.subject = "mailto:ops@example.com"
        settings.webPush?.urgency = urgency
        return settings
    }

    func testTheAppsSettingsAreCheckedAndItsVAPIDKeyRead() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webpush-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let builder = AppProfileBuilder(httpClient: nil, fcm: .init(), logger: Logger(label: "test"))
        let good = try settings(directory)
        let profile = try builder.build(name: "toto", settings: good, previous: nil)
        XCTAssertNotNil(profile.sender(for: .webpush), "the console sink without an HTTP client")
        XCTAssertEqual(good.webPush?.clientSettings.urgency, .high)
        let signer = try XCTUnwrap(good.webPush).signer()
        XCTAssertEqual(signer.publicKey.count, 87, "the 65-byte point in base64url")

        XCTAssertNil(try builder.build(name: "toto", settings: AppSettings(), previous: nil).sender(for: .webpush))
        var bad: [AppSettings] = []
        for change in [
            { (s: inout WebPushSettings) in s.subject = "ops@example.com" }, { $0.urgency = "urgent" }, { $0.ttlSeconds = -1 },
            { $0.vapidKeyFile = "" }, { $0.vapidKeyFile = directory.appendingPathComponent("none.pem").path }, { $0.maxInFlightPerHost = 0 },
        ] as [(inout WebPushSettings) -> Void] {
            var copy = good
            change(&copy.webPush!)
            bad.append(copy)
        }
        let rsa = directory.appendingPathComponent("rsa.json")
        try #"{"kty":"oct","kid":"k","alg":"dir","k":"\#(Base64URL.encode(Array(repeating: 1, count: 32)))"}"#.write(
            to: rsa, atomically: true, encoding: .utf8)
        var notEC = good
        notEC.webPush?.vapidKeyFile = rsa.path
        bad.append(notEC)
        for settings in bad {
            XCTAssertThrowsError(try builder.build(name: "toto", settings: settings, previous: nil), "\(String(describing: settings.webPush))")
        }
        // From the settings file's JSON.
        let decoded = try JSONDecoder().decode(
            AppSettings.self, from: Data(#"{"webPush":{"vapidKeyFile":"/k.pem","subject":"https://example.com","allowPrivateEndpoints":true,"ttlSeconds":60}}"#.utf8))
        XCTAssertEqual(decoded.webPush?.allowPrivateEndpoints, true)
        XCTAssertEqual(decoded.webPush?.ttlSeconds, 60)
        XCTAssertEqual(decoded.webPush?.urgency, "normal")
    }

    func testDeliveriesAreGatedPerAppAndPushServiceHost() throws {
        let p256dh = try browserKey()
        func gate(_ endpoint: String) -> DeliveryQueue.Gate {
            let client = WebPushClient(http: Self.http, vapid: Self.vapid, settings: .init())
            return WebPushSender(app: "toto", client: client, maxInFlightPerHost: 5)
                .gate(token: SubscriberKey.webPushToken(endpoint: endpoint, p256dh: p256dh, auth: Self.auth))
        }
        XCTAssertEqual(gate("https://Push.Example.net/a"), DeliveryQueue.Gate(key: "webpush:toto/push.example.net", limit: 5))
        XCTAssertEqual(gate("https://push.example.net:8443/b").key, "webpush:toto/push.example.net")
        XCTAssertEqual(gate("https://fcm.googleapis.com/fcm/send/x").key, "webpush:toto/fcm.googleapis.com")
    }

    private static let http: HTTPClient = {
        do {
            return try HTTPClient(configuration: HTTPClientConfiguration(), logger: Logger(label: "test"))
        } catch {
            fatalError("\(error)")
        }
    }()
    private static let vapid: VAPIDSigner = {
        do {
            return try VAPIDSigner(key: ECPrivateKey(), subject: "mailto:ops@example.com")
        } catch {
            fatalError("\(error)")
        }
    }()

    func testTheDocumentIsCutSoonerForWebPushThanForFCM() throws {
        let profile = try AppProfileBuilder(httpClient: nil, fcm: .init(), logger: Logger(label: "test"))
            .build(name: "toto", settings: AppSettings(), previous: nil)
        let builder = PayloadBuilder(metrics: GatewayMetrics(), logger: Logger(label: "test"))
        let path = try DataPath("/a")
        // A value whose v1 payload is about 4,030 bytes: under FCM's 4064-byte threshold, over Web Push's 3964.
        let value = JSONValue.string(String(repeating: "z", count: 3990))
        let browser = SubscriberKey(kind: .webpush, token: SubscriberKey.webPushToken(endpoint: Self.endpoint, p256dh: "k", auth: "a"), uid: "u")
        let phone = SubscriberKey(kind: .mobile, token: "phone", uid: "u")
        func text(_ subscriber: SubscriberKey, _ format: NotificationFormat) throws -> String {
            String(decoding: try XCTUnwrap(builder.payload(profile: profile, path: path, subscriber: subscriber, format: format, content: .value(value))), as: UTF8.self)
        }
        XCTAssertTrue(try text(phone, .v1).hasPrefix(#"{"s":"OK""#))
        XCTAssertEqual(try text(browser, .v1), #"{"s":"TooBig","t":"value","app":"toto","sp":"/a"}"#)
        // v2: the event in base64url, so about 3/4 of the bytes; every size of value stays within Web Push's limit,
        // some take more than it for FCM.
        var largestForPhone = 0
        for length in stride(from: 2800, through: 3100, by: 5) {
            let content = NotificationContent.value(.string(String(repeating: "z", count: length)))
            let forBrowser = try XCTUnwrap(builder.payload(profile: profile, path: path, subscriber: browser, format: .v2, content: content))
            XCTAssertLessThanOrEqual(forBrowser.count, 3993, "\(length)")
            let forPhone = try XCTUnwrap(builder.payload(profile: profile, path: path, subscriber: phone, format: .v2, content: content))
            largestForPhone = max(largestForPhone, forPhone.count)
        }
        XCTAssertGreaterThan(largestForPhone, 3993)
    }

    func testTheEventHookShowsTheBrowsersSubscriptionAsAnObject() throws {
        let subscriber = SubscriberKey(
            kind: .webpush, token: SubscriberKey.webPushToken(endpoint: Self.endpoint, p256dh: "k\"1", auth: "a"), uid: "alice")
        let subscription = Subscription(
            path: try DataPath("/a"), subscriber: subscriber, settings: SubscriptionSettings(mode: .noData, format: .v2, expiresAt: 1, authUID: "alice"))
        let event = EventHookEvent(EndedSubscription(app: "toto", subscription: subscription, cause: .revoked(.disabled)), at: 1_700_000_000)
        let body = try XCTUnwrap(JSONParser.parse(event.body).objectValue)
        XCTAssertEqual(
            body["data"]?.objectValue?["context"],
            .object(["endpoint": .string(Self.endpoint), "keys": .object(["p256dh": .string("k\"1"), "auth": .string("a")])]))
        XCTAssertEqual(body["data"]?.objectValue?["kind"], .string("webpush"))
    }
}
