import Synchronization
import XCTest

@testable import Providers

final class FCMAccessTokenManagerTests: XCTestCase {
    /// A settable clock and a counting fetcher that issues `tok-N` valid for `lifetime` seconds.
    final class Harness: Sendable {
        let time = Mutex<Double>(1_000_000)
        let fetches = Mutex<Int>(0)
        let failNext = Mutex<Bool>(false)
        let lifetime: Double
        let fetchDelay: Duration

        init(lifetime: Double = 3600, fetchDelay: Duration = .zero) {
            self.lifetime = lifetime
            self.fetchDelay = fetchDelay
        }

        func advance(_ seconds: Double) { time.withLock { $0 += seconds } }

        func makeManager(margin: Duration = .seconds(300), backoff: Duration = .seconds(1)) -> FCMAccessTokenManager {
            FCMAccessTokenManager(
                refreshMargin: margin, failureBackoff: backoff, now: { self.time.withLock { $0 } },
                fetch: { () async throws(FCMError) -> OAuthAccessToken in
                    if self.fetchDelay > .zero { try? await Task.sleep(for: self.fetchDelay) }
                    let number = self.fetches.withLock { $0 += 1; return $0 }
                    if self.failNext.withLock({ value in defer { value = false }; return value }) {
                        throw FCMError(source: .authentication, httpStatus: 400, status: "invalid_grant", message: "no")
                    }
                    let now = self.time.withLock { $0 }
                    return OAuthAccessToken(value: "tok-\(number)", obtainedAt: now, expiresAt: now + self.lifetime)
                })
        }
    }

    func testCachesUntilTheRefreshMargin() async throws {
        let harness = Harness()
        let manager = harness.makeManager()
        let first = try await manager.accessToken()
        XCTAssertEqual(first, "tok-1")
        harness.advance(3600 - 301)
        let stillCached = try await manager.accessToken()
        XCTAssertEqual(stillCached, "tok-1")
        XCTAssertEqual(harness.fetches.withLock { $0 }, 1)
        harness.advance(2)  // inside the margin, old token still valid: refresh starts, old one is served
        let duringRefresh = try await manager.accessToken()
        XCTAssertEqual(duringRefresh, "tok-1")
        var refreshed = ""
        for _ in 0..<200 where refreshed != "tok-2" {
            try await Task.sleep(for: .milliseconds(5))
            refreshed = try await manager.accessToken()
        }
        XCTAssertEqual(refreshed, "tok-2")
        let fetchCount = await manager.fetchCount
        XCTAssertEqual(fetchCount, 2)
    }

    func testAFreshTokenIsReadWithoutTheActorUntilItsRefreshIsDue() async throws {
        let harness = Harness()
        let manager = harness.makeManager()
        XCTAssertNil(manager.freshToken(), "nothing cached yet")
        _ = try await manager.accessToken()
        XCTAssertEqual(manager.freshToken(), "tok-1")
        harness.advance(3600 - 299)
        XCTAssertNil(manager.freshToken(), "a refresh is due: the caller goes through accessToken()")
        _ = try await manager.accessToken()
        await manager.invalidate("tok-1")
        XCTAssertNotEqual(manager.freshToken(), "tok-1", "a refused token is never read again")
    }

    func testExpiredTokenIsNeverServed() async throws {
        let harness = Harness()
        let manager = harness.makeManager()
        _ = try await manager.accessToken()
        harness.advance(3600)
        let token = try await manager.accessToken()
        XCTAssertEqual(token, "tok-2")
    }

    func testConcurrentCallersShareOneFetch() async throws {
        let harness = Harness(fetchDelay: .milliseconds(50))
        let manager = harness.makeManager()
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 { group.addTask { try await manager.accessToken() } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        XCTAssertEqual(Set(tokens), ["tok-1"])
        XCTAssertEqual(harness.fetches.withLock { $0 }, 1)
    }

    func testShortLivedTokensRefreshAtHalfTheirLifetime() async throws {
        let harness = Harness(lifetime: 60)
        let manager = harness.makeManager()  // margin 300 s > lifetime: capped at 30 s
        _ = try await manager.accessToken()
        harness.advance(29)
        let early = try await manager.accessToken()
        XCTAssertEqual(early, "tok-1")
        XCTAssertEqual(harness.fetches.withLock { $0 }, 1)
    }

    func testInvalidateForcesAFreshToken() async throws {
        let harness = Harness()
        let manager = harness.makeManager()
        let first = try await manager.accessToken()
        await manager.invalidate("some-other-token")
        let same = try await manager.accessToken()
        XCTAssertEqual(same, first)
        await manager.invalidate(first)
        let second = try await manager.accessToken()
        XCTAssertEqual(second, "tok-2")
    }

    func testFailuresAreRememberedForTheBackoff() async throws {
        let harness = Harness()
        let manager = harness.makeManager(backoff: .seconds(1))
        harness.failNext.withLock { $0 = true }
        for _ in 0..<3 {
            do {
                _ = try await manager.accessToken()
                XCTFail("expected a failure")
            } catch {
                XCTAssertEqual(error.classification, .ourFault)
                XCTAssertEqual(error.status, "invalid_grant")
            }
        }
        XCTAssertEqual(harness.fetches.withLock { $0 }, 1)
        harness.advance(1.5)
        let token = try await manager.accessToken()
        XCTAssertEqual(token, "tok-2")
    }
}
