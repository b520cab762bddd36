import XCTest

@testable import GatewayAPI

/// The one parse of a call's path that the owner routing, the hop and the routes share.
final class APIPathTests: XCTestCase {
    func testAppCallsAreRecognisedOnTheDecodedSegments() throws {
        let wakeup = try APIPath("/base/my%20app/.wakeup/a/b%2Fc")
        XCTAssertEqual(wakeup.segments, ["", "base", "my app", ".wakeup", "a", "b/c"])
        XCTAssertEqual(wakeup.call?.app, "my app")
        XCTAssertEqual(wakeup.call?.isAdmin, false)
        XCTAssertEqual(try APIPath("/datasync/v2/chat/subscriptions/u1/id").call?.app, "chat")
        XCTAssertEqual(try APIPath("/admin/apps/chat").call?.isAdmin, true)
        for other in ["/healthz", "/metrics", "/admin/apps", "/base//.wakeup/x", "/datasync/v2/chat/other/u"] {
            XCTAssertNil(try APIPath(other).call, other)
        }
    }

    func testDotSegmentsAndBrokenEncodingAreRefused() {
        for bad in ["/base/app/.wakeup/../x", "/base/app/.wakeup/%2E%2e/x", "/base/app/.wakeup/./x", "/base/app/.wakeup/%zz"] {
            XCTAssertThrowsError(try APIPath(bad), bad) { error in
                XCTAssertEqual((error as? APIError)?.status, .badRequest)
            }
        }
    }

    func testTheRoutesReadTheSameParse() throws {
        let target = try WakeupTarget(try APIPath("/base/chat/.wakeup/rooms/r1/"))
        XCTAssertEqual(target.app, "chat")
        XCTAssertEqual(target.path.description, "/rooms/r1")
        XCTAssertThrowsError(try WakeupTarget(try APIPath("/base/chat/.wakeup/a//b")))
        let v2 = try V2Target(try APIPath("/datasync/v2/chat/subscriptions/u%201/x"), withID: true)
        XCTAssertEqual([v2.app, v2.uid, v2.id], ["chat", "u 1", "x"])
        XCTAssertThrowsError(try V2Target(try APIPath("/datasync/v2/chat/subscriptions/u1"), withID: true))
    }
}
