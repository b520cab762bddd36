import XCTest

@testable import PushCore

final class DataPathTests: XCTestCase {
    func testNormalisation() throws {
        XCTAssertEqual(try DataPath("").description, "/")
        XCTAssertEqual(try DataPath("/").description, "/")
        XCTAssertEqual(try DataPath("a/b").description, "/a/b")
        XCTAssertEqual(try DataPath("/a/b/").description, "/a/b")
        XCTAssertEqual(try DataPath("/some/webcom/path").segments, ["some", "webcom", "path"])
        XCTAssertEqual(try DataPath("/é/ü").description, "/é/ü")
    }

    func testRejectsForbiddenKeys() {
        XCTAssertEqual(Self.error("/a//b"), .emptyKey)
        XCTAssertEqual(Self.error("//"), .emptyKey)
        for bad in ["/a.b", "/$x", "/a#", "/[0]", "/x]", "/a\u{01}b", "/a\u{7F}", "/a\nb"] {
            guard case .invalidCharacter = Self.error(bad) else { return XCTFail("accepted \(bad.debugDescription)") }
        }
    }

    func testLengthLimitIs2048BytesOfUTF8() throws {
        let exact = "/" + String(repeating: "a", count: 2047)
        XCTAssertEqual(try DataPath(exact).utf8Length, 2048)
        XCTAssertEqual(Self.error("/" + String(repeating: "a", count: 2048)), .tooLong)
        // 'é' is 2 bytes: 1 + 2 * 1024 = 2049 bytes.
        XCTAssertEqual(Self.error("/" + String(repeating: "é", count: 1024)), .tooLong)
        XCTAssertNoThrow(try DataPath("/" + String(repeating: "é", count: 1023) + "a"))
    }

    func testPrefix() throws {
        XCTAssertTrue(DataPath.root.isPrefix(of: try DataPath("/a")))
        XCTAssertTrue(try DataPath("/a").isPrefix(of: try DataPath("/a/b")))
        XCTAssertFalse(try DataPath("/a/b").isPrefix(of: try DataPath("/a")))
        XCTAssertFalse(try DataPath("/a").isPrefix(of: try DataPath("/ab")))
    }

    static func error(_ text: String) -> PathError? {
        do {
            _ = try DataPath(text)
            return nil
        } catch { return error }
    }
}
