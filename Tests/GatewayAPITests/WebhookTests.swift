import CompactJSON
import Logging
import PushCore
import XCTest

@testable import Gateway
@testable import GatewayAPI

final class WebhookTests: XCTestCase {
    func testDeliveriesAreGatedPerAppAndDestinationHost() {
        func gate(_ app: String, _ destination: String) -> DeliveryQueue.Gate {
            let token = SubscriberKey.webhook(destination: destination, context: "ctx", uid: "u").token
            return WebhookSender.gate(project: "webhook:" + app, token: token, limit: 3)
        }
        let a = gate("app", "https://Hooks.example:8443/a")
        XCTAssertEqual(a, DeliveryQueue.Gate(key: "webhook:app/hooks.example", limit: 3))
        XCTAssertEqual(gate("app", "https://hooks.example/other?x=1").key, a.key, "one host: one gate, whatever the path or port")
        XCTAssertNotEqual(gate("app", "https://other.example/a").key, a.key)
        XCTAssertNotEqual(gate("app2", "https://hooks.example/a").key, a.key, "each app has its own places")
    }

    func testMessageIDIsStableForOneMessageAndDiffersBetweenMessages() {
        let body = Array(#"{"t":"v"}"#.utf8)
        let id = WebhookSender.messageID(origin: "evt-1", body: body)
        XCTAssertTrue(id.hasPrefix("msg_"))
        XCTAssertEqual(id.count, 26)
        XCTAssertEqual(id, WebhookSender.messageID(origin: "evt-1", body: body))
        XCTAssertNotEqual(id, WebhookSender.messageID(origin: "evt-2", body: body))
        XCTAssertNotEqual(id, WebhookSender.messageID(origin: "evt-1", body: Array(#"{"t":"r"}"#.utf8)))
    }

    func testV2BodyParsingOfWebhooks() throws {
        func parse(_ json: String) throws(APIError) -> V2SubscriptionRequest {
            guard case .object(let object)? = try? JSONParser.parse(Array(json.utf8)) else { fatalError("bad test JSON") }
            return try V2Routes.fullRequest(object)
        }
        let request = try parse(#"{"kind":"webhook","path":"/a","destination":"https://h.example/x","context":"free text é"}"#)
        XCTAssertEqual(request.kind, .webhook)
        XCTAssertEqual(request.destination, "https://h.example/x")
        XCTAssertEqual(request.context, "free text é")
        XCTAssertEqual(try parse(#"{"kind":"webhook","path":"/a","destination":"https://h.example/x"}"#).context, "")
        let bob = #"{"alg":"ECDH-ES+A256KW","jwk":{"kty":"EC","crv":"P-256","x":"weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ","y":"e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck"}}"#
        XCTAssertNotNil(try parse(#"{"kind":"mobile","path":"/a","context":"t","encryption":"# + bob + "}").encryption, "a device's key")
        for bad in [
            #"{"kind":"webhook","path":"/a"}"#, #"{"kind":"webhook","path":"/a","destination":"http://h.example/"}"#,
            #"{"kind":"mobile","path":"/a","context":"t","destination":"https://h.example/"}"#,
            #"{"kind":"webhook","path":"/a","destination":7}"#,
            // The same key on a webhook: its deliveries are plain JSON.
            #"{"kind":"webhook","path":"/a","destination":"https://h.example/x","encryption":"# + bob + "}",
        ] {
            XCTAssertThrowsError(try parse(bad), bad)
        }
    }

    func testWebhookBodyIsTheEventWithItsContextAndIsCutDownToTheLimit() throws {
        var settings = AppSettings()
        settings.webhook = WebhookSettings()
        settings.webhook?.secrets = ["whsec_" + String(repeating: "A", count: 32)]
        settings.webhook?.maxBodyBytes = 1024
        let profile = try AppProfileBuilder(httpClient: nil, fcm: .init(), logger: Logger(label: "test"))
            .build(name: "toto", settings: settings, previous: nil)
        let builder = PayloadBuilder(metrics: GatewayMetrics(), logger: Logger(label: "test"))
        let path = try DataPath("/a")
        let subscriber = SubscriberKey.webhook(destination: "https://h.example/x", context: "c\"1", uid: "alice")
        let id = SubscriptionID.make(app: "toto", path: path, subscriber: subscriber)
        let small = builder.payload(profile: profile, path: path, subscriber: subscriber, format: .v2, content: .value(.number("1")))
        XCTAssertEqual(
            small.map { String(decoding: $0, as: UTF8.self) },
            #"{"t":"v","m":"value","a":"toto","v":1,"s":"OK","p":"/a","id":"\#(id)","context":"c\"1"}"#)
        let big = builder.payload(
            profile: profile, path: path, subscriber: subscriber, format: .v2, content: .value(.string(String(repeating: "z", count: 2000))))
        XCTAssertEqual(
            big.map { String(decoding: $0, as: UTF8.self) },
            #"{"t":"v","m":"value","a":"toto","s":"TooBig","p":"/a","id":"\#(id)","context":"c\"1"}"#)
        // The 6-tuple's id: destination and context are separate parts.
        XCTAssertEqual(id, SubscriptionID.make(app: "toto", uid: "alice", kind: .webhook, destination: "https://h.example/x", path: path, context: "c\"1"))
    }
}
