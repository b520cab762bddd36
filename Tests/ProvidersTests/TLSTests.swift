import CurlHTTP
import Providers
import XCTest

/// h2 over TLS (ALPN) with a self-signed certificate trusted through `caFile`.
final class TLSTests: XCTestCase {
    nonisolated(unsafe) static var fake: FakeFCMProcess?

    override class func setUp() {
        super.setUp()
        fake = try? FakeFCMProcess(tls: true)
    }

    override class func tearDown() {
        fake?.stop()
        fake = nil
        super.tearDown()
    }

    func testFCMOverTLSUsesHTTP2AndFewConnections() async throws {
        guard let fake = Self.fake, let caFile = fake.caFile else { throw XCTSkip("fake FCM server unavailable") }
        XCTAssertTrue(fake.baseURL.hasPrefix("https://"))
        let http = try HTTPClient(configuration: HTTPClientConfiguration(caFile: caFile), logger: testLogger("test.tls"))
        let probe = try await http.send(HTTPRequest(url: fake.baseURL + "/_fake/requests"))
        XCTAssertEqual(probe.version, .http2)

        let client = try FCMClient(
            serviceAccount: try FCMServiceAccount(contentsOfFile: fake.serviceAccountPath), httpClient: http,
            configuration: FCMConfiguration(baseURL: fake.baseURL), logger: testLogger("test.fcm"))
        let sent = await withTaskGroup(of: Int.self) { group in
            for index in 0..<200 {
                group.addTask {
                    if case .sent = await client.send(token: "tls-\(index)", data: [("i", "\(index)")]) { return 1 }
                    return 0
                }
            }
            return await group.reduce(0, +)
        }
        XCTAssertEqual(sent, 200)
        let recorded = try await fake.requests(http)
        XCTAssertLessThanOrEqual(recorded["connections"] as? Int ?? 99, 2)
        let versions = Set((recorded["sends"] as? [[String: Any]] ?? []).compactMap { $0["http_version"] as? String })
        XCTAssertEqual(versions, ["2"])
        await http.shutdown()
    }

    func testUntrustedCertificateFails() async throws {
        guard let fake = Self.fake else { throw XCTSkip("fake FCM server unavailable") }
        let http = try HTTPClient(logger: testLogger("test.tls"))
        do {
            _ = try await http.send(HTTPRequest(url: fake.baseURL + "/_fake/requests"))
            XCTFail("a self-signed certificate must not be trusted without caFile")
        } catch let error as HTTPClientError {
            XCTAssertEqual(error.code, .transport)
            XCTAssertEqual(error.curlCode, 60, "\(error)")  // CURLE_PEER_FAILED_VERIFICATION
        }
        await http.shutdown()
    }
}
