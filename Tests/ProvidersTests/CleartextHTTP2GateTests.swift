import XCTest

@testable import CurlHTTP

final class CleartextHTTP2GateTests: XCTestCase {
    private func slot(_ id: UInt64) -> RequestSlot {
        RequestSlot(id: id, request: HTTPRequest(url: "http://h:1/x"))
    }

    func testOrigin() {
        XCTAssertEqual(CleartextHTTP2Gate.origin(of: "http://127.0.0.1:8080/v1/x?y"), "http://127.0.0.1:8080")
        XCTAssertEqual(CleartextHTTP2Gate.origin(of: "http://host"), "http://host")
        XCTAssertEqual(CleartextHTTP2Gate.origin(of: "http://host?q"), "http://host")
        XCTAssertNil(CleartextHTTP2Gate.origin(of: "https://host/x"))
    }

    func testOneProbeThenMultiplexedReuseUpToTheLimit() {
        var gate = CleartextHTTP2Gate(maxActivePerOrigin: 2)
        let origin = "http://h:1"
        XCTAssertEqual(gate.admit(slot(1), origin: origin), .probe)
        XCTAssertNil(gate.admit(slot(2), origin: origin))
        XCTAssertNil(gate.admit(slot(3), origin: origin))
        XCTAssertNil(gate.admit(slot(4), origin: origin))
        XCTAssertEqual(gate.heldCount, 3)
        let released = gate.finished(id: 1, origin: origin, usedHTTP2: true, connectionSuspect: false)
        XCTAssertEqual(released.map { $0.0.id }, [2, 3])
        XCTAssertEqual(released.map(\.1), [.reuse, .reuse])
        XCTAssertEqual(gate.heldCount, 1)
        let next = gate.finished(id: 2, origin: origin, usedHTTP2: true, connectionSuspect: false)
        XCTAssertEqual(next.map { $0.0.id }, [4])
        XCTAssertEqual(gate.admit(slot(5), origin: origin), nil)  // 3 and 4 active
    }

    func testFailedProbeLetsTheNextRequestProbe() {
        var gate = CleartextHTTP2Gate(maxActivePerOrigin: 10)
        let origin = "http://h:1"
        XCTAssertEqual(gate.admit(slot(1), origin: origin), .probe)
        XCTAssertNil(gate.admit(slot(2), origin: origin))
        XCTAssertNil(gate.admit(slot(3), origin: origin))
        let released = gate.finished(id: 1, origin: origin, usedHTTP2: false, connectionSuspect: false)
        XCTAssertEqual(released.map { $0.0.id }, [2])
        XCTAssertEqual(released.map(\.1), [.probe])
    }

    func testLostConnectionGoesBackToProbing() {
        var gate = CleartextHTTP2Gate(maxActivePerOrigin: 10)
        let origin = "http://h:1"
        XCTAssertEqual(gate.admit(slot(1), origin: origin), .probe)
        _ = gate.finished(id: 1, origin: origin, usedHTTP2: true, connectionSuspect: false)
        XCTAssertEqual(gate.admit(slot(2), origin: origin), .reuse)
        _ = gate.finished(id: 2, origin: origin, usedHTTP2: false, connectionSuspect: true)
        XCTAssertEqual(gate.admit(slot(3), origin: origin), .probe)
    }

    func testCancelledHeldRequestsAreSkippedAndShutdownTakesTheRest() {
        var gate = CleartextHTTP2Gate(maxActivePerOrigin: 10)
        let origin = "http://h:1"
        XCTAssertEqual(gate.admit(slot(1), origin: origin), .probe)
        let cancelled = slot(2)
        XCTAssertNil(gate.admit(cancelled, origin: origin))
        XCTAssertNil(gate.admit(slot(3), origin: origin))
        cancelled.finish(.failure(CancellationError()))
        let released = gate.finished(id: 1, origin: origin, usedHTTP2: true, connectionSuspect: false)
        XCTAssertEqual(released.map { $0.0.id }, [3])
        XCTAssertEqual(gate.heldCount, 0)
        XCTAssertEqual(gate.admit(slot(4), origin: "http://other:2"), .probe)
        XCTAssertNil(gate.admit(slot(5), origin: "http://other:2"))
        XCTAssertEqual(gate.takeAllHeld().map(\.id), [5])
        XCTAssertEqual(gate.heldCount, 0)
    }
}
