import XCTest

@testable import PushCore

final class WebhookURLTests: XCTestCase {
    func testAcceptedURLs() throws {
        let url = try WebhookURL("https://Hooks.Example.com:8443/a/b?x=1")
        XCTAssertEqual(url.host, "hooks.example.com")
        XCTAssertEqual(url.port, 8443)
        XCTAssertNil(url.literal)
        XCTAssertNil(url.refusal)
        XCTAssertEqual(try WebhookURL("https://example.com").port, 443)
        XCTAssertEqual(try WebhookURL("https://[2001:db8::1]:9/x").literal?.description, "2001:db8::1")
        XCTAssertNil(try WebhookURL("https://8.8.8.8/x").refusal)
        XCTAssertNil(try WebhookURL("https://[2606:4700::1]/x").refusal)
    }

    func testSyntaxRefusals() {
        for text in [
            "http://example.com/", "ftp://example.com/", "https://", "https://user@example.com/", "https://example.com/#f",
            "https://exa mple.com/", "https://example.com:0/", "https://example.com:65536/", "https://example.com:x/",
            "https://2130706433/", "https://127.1/", "https://0x7f.0.0.1/", "https://[::1/", "https://[example.com]/",
            "https://a..b/", "https://ex_ample.com/", "https://example.com\\@evil/", "https://é.com/",
        ] {
            XCTAssertThrowsError(try WebhookURL(text), text)
        }
    }

    func testRefusedAddressesAndNames() throws {
        for text in [
            "https://127.0.0.1/", "https://10.0.0.1/", "https://172.16.5.4/", "https://172.31.255.255/", "https://192.168.1.1/",
            "https://169.254.169.254/", "https://100.64.0.1/", "https://0.0.0.0/", "https://224.0.0.1/", "https://255.255.255.255/",
            "https://198.18.0.1/", "https://[::1]/", "https://[::]/", "https://[fe80::1]/", "https://[fc00::1]/", "https://[fd12::1]/",
            "https://[ff02::1]/", "https://[::ffff:127.0.0.1]/", "https://[::ffff:10.0.0.1]/", "https://[64:ff9b::a00:1]/",
            "https://localhost/", "https://LOCALHOST:8080/", "https://api.localhost/",
        ] {
            XCTAssertNotNil(try WebhookURL(text).refusal, text)
        }
        XCTAssertNil(try WebhookURL("https://172.32.0.1/").refusal)
        XCTAssertNil(try WebhookURL("https://[::ffff:8.8.8.8]/").refusal)
        XCTAssertNil(try WebhookURL("https://notlocalhost.example/").refusal)
    }

    func testWebhookSubscriberKeepsDestinationAndContextApart() {
        let key = SubscriberKey.webhook(destination: "https://h.example/x", context: "a\nb é", uid: "alice")
        XCTAssertEqual(key.kind, .webhook)
        XCTAssertEqual(key.destination, "https://h.example/x")
        XCTAssertEqual(key.context, "a\nb é")
        // The encoding is one-to-one because a destination never holds a line feed.
        XCTAssertThrowsError(try WebhookURL("https://h.example/x\na"))
        let empty = SubscriberKey.webhook(destination: "https://h.example/x", context: "", uid: "alice")
        XCTAssertEqual(empty.context, "")
        let mobile = SubscriberKey(kind: .mobile, token: "tok\nen", uid: "alice")
        XCTAssertEqual(mobile.destination, "")
        XCTAssertEqual(mobile.context, "tok\nen")
    }
}
