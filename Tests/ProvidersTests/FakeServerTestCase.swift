import CurlHTTP
import Foundation
import XCTest

/// A fake provider server run as a process (`tests/fakes/fake_fcm.py`, `fake_hms.py`).
protocol FakeServer: AnyObject, Sendable {
    /// What the skip message names: `FCM`, `HMS`.
    static var provider: String { get }
    init(tls: Bool, timeout: TimeInterval) throws
    func stop()
    /// Forgets recorded requests and injections.
    func reset(_ client: HTTPClient) async throws
}

extension FakeFCMProcess: FakeServer {
    static var provider: String { "FCM" }
}

extension FakeHMSProcess: FakeServer {
    static var provider: String { "HMS" }
}

/// The running fakes, one per test class (a generic class cannot have static stored properties).
nonisolated(unsafe) private var runningFakes: [ObjectIdentifier: any FakeServer] = [:]

/// Tests against a fake provider server (h2c): one server per test class, started before its first test and
/// stopped after its last, reset before each test, with a fresh HTTP client per test. Skipped without
/// python3 + hypercorn.
class FakeServerTestCase<Server: FakeServer>: XCTestCase {
    override class func setUp() {
        super.setUp()
        runningFakes[ObjectIdentifier(self)] = try? Server(tls: false, timeout: 30)
    }

    override class func tearDown() {
        runningFakes.removeValue(forKey: ObjectIdentifier(self))?.stop()
        super.tearDown()
    }

    var fake: Server!
    var http: HTTPClient!

    override func setUp() async throws {
        guard let fake = runningFakes[ObjectIdentifier(Self.self)] as? Server else {
            throw XCTSkip("fake \(Server.provider) server (python3 + hypercorn) unavailable")
        }
        self.fake = fake
        http = try HTTPClient(logger: testLogger("test.http"))
        try await fake.reset(http)
    }

    override func tearDown() async throws {
        await http?.shutdown()
        http = nil
    }
}
