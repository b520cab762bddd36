import XCTest

@testable import Providers

final class ProviderJSONParserTests: XCTestCase {
    func testParsesNestedDocuments() throws {
        let value = try ProviderJSONParser.parse(Array(#" {"a": [1, -2.5e2, true, false, null, "x\u00e9\ud83d\ude00\n"], "b": {}} "#.utf8))
        XCTAssertEqual(value["a"], .array([.number(1), .number(-250), .bool(true), .bool(false), .null, .string("xé😀\n")]))
        XCTAssertEqual(value["b"], .object([]))
    }

    func testRejectsInvalidDocuments() {
        for text in ["", "{", "[1,]", "{\"a\":}", "01", "1.", "-", "tru", "\"\\x\"", "\"\u{01}\"", "{} x", "\"\\ud800\"", "[1 2]", "NaN", "\"\\udc00\""] {
            XCTAssertThrowsError(try ProviderJSONParser.parse(Array(text.utf8)), "accepted \(text)")
        }
        XCTAssertThrowsError(try ProviderJSONParser.parse(Array(String(repeating: "[", count: 100).utf8)))
        XCTAssertThrowsError(try ProviderJSONParser.parse([0x22, 0xFF, 0x22]))
    }

    func testServiceAccountParsing() throws {
        let json = #"{"type":"service_account","project_id":"p-1","private_key_id":"kid1","private_key":"-----BEGIN PRIVATE KEY-----\nX\n-----END PRIVATE KEY-----\n","client_email":"a@p-1.iam.gserviceaccount.com","token_uri":"https://oauth2.googleapis.com/token"}"#
        let account = try FCMServiceAccount(json: Array(json.utf8))
        XCTAssertEqual(account.projectID, "p-1")
        XCTAssertEqual(account.privateKeyID, "kid1")
        XCTAssertEqual(account.clientEmail, "a@p-1.iam.gserviceaccount.com")
        XCTAssertTrue(account.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        XCTAssertFalse(account.description.contains("PRIVATE KEY"))
        XCTAssertThrowsError(try FCMServiceAccount(json: Array(#"{"project_id":"p"}"#.utf8)))
        XCTAssertThrowsError(try FCMServiceAccount(json: Array(json.replacingOccurrences(of: "p-1\"", with: "p/1\"").utf8)))
        XCTAssertThrowsError(try FCMServiceAccount(json: Array(json.replacingOccurrences(of: "service_account", with: "user").utf8)))
    }
}
