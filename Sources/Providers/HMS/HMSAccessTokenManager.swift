import CurlHTTP
import Logging

/// Caches the OAuth 2.0 access token of one Huawei app and renews it before it expires (same behaviour as
/// ``FCMAccessTokenManager``).
///
/// - A cached token is used until `refreshMargin` (default 5 min, at most half the token's lifetime) before
///   its expiry; then one refresh starts. Until the old token is really about to expire, callers keep using
///   it and do not wait for the refresh.
/// - Concurrent callers share one in-flight fetch, which is not cancelled when a waiting caller is.
/// - A failed fetch is remembered for `failureBackoff` (default 1 s): callers fail fast with the same error
///   instead of hammering the token endpoint.
/// - ``invalidate(_:)`` drops a token HMS refused (`80200001`, `80200003`, HTTP 401), so the next call
///   fetches a fresh one.
public actor HMSAccessTokenManager {
    /// A token is never handed out this close to its expiry (capped at half its lifetime).
    static let expirySafetySeconds = 10.0

    private let fetcher: @Sendable () async throws(HMSError) -> OAuthAccessToken
    private let now: @Sendable () -> Double
    private let refreshMargin: Double
    private let failureBackoff: Double

    private var cached: OAuthAccessToken?
    private var inFlight: Task<OAuthAccessToken, any Error>?
    private var lastFailure: (error: HMSError, at: Double)?

    /// How many fetches were started (for tests and metrics).
    public private(set) var fetchCount = 0

    /// A manager that obtains tokens for `credentials` from `configuration.tokenURL` through `httpClient`.
    public init(
        credentials: HMSCredentials,
        httpClient: HTTPClient,
        configuration: HMSConfiguration = HMSConfiguration(),
        logger: Logger,
        now: @escaping @Sendable () -> Double = WallClock.now
    ) {
        let fetcher = HMSTokenFetcher(
            credentials: credentials, http: httpClient, tokenURL: configuration.tokenURL,
            timeout: configuration.tokenRequestTimeout, now: now, logger: logger)
        self.init(
            refreshMargin: configuration.tokenRefreshMargin, failureBackoff: configuration.tokenFailureBackoff,
            now: now, fetch: { () async throws(HMSError) -> OAuthAccessToken in try await fetcher.fetch() })
    }

    /// A manager over any fetch function (tests inject one with a manual clock).
    init(
        refreshMargin: Duration,
        failureBackoff: Duration,
        now: @escaping @Sendable () -> Double,
        fetch: @escaping @Sendable () async throws(HMSError) -> OAuthAccessToken
    ) {
        self.fetcher = fetch
        self.now = now
        self.refreshMargin = refreshMargin.seconds
        self.failureBackoff = failureBackoff.seconds
    }

    /// A valid access token, from the cache or freshly fetched. Errors have source `.authentication`
    /// (or `.cancelled`).
    public func accessToken() async throws(HMSError) -> String {
        let time = now()
        if let cached, time < refreshTime(of: cached) { return cached.value }
        if inFlight == nil, let failure = lastFailure, time < failure.at + failureBackoff {
            if let cached, time < usableUntil(cached) { return cached.value }
            throw failure.error
        }
        let task = startRefresh()
        if let cached, time < usableUntil(cached) { return cached.value }
        do {
            return try await task.value.value
        } catch let error as HMSError {
            throw error
        } catch {
            throw HMSError(source: .authentication, message: "token fetch failed: \(error)")
        }
    }

    /// Forgets `token` if it is the cached one (HMS refused it). A newer token is kept.
    public func invalidate(_ token: String) {
        if cached?.value == token {
            cached = nil
        }
    }

    private func refreshTime(of token: OAuthAccessToken) -> Double {
        let lifetime = token.expiresAt - token.obtainedAt
        return token.expiresAt - Swift.min(refreshMargin, lifetime / 2)
    }

    private func usableUntil(_ token: OAuthAccessToken) -> Double {
        let lifetime = token.expiresAt - token.obtainedAt
        return token.expiresAt - Swift.min(Self.expirySafetySeconds, lifetime / 2)
    }

    private func startRefresh() -> Task<OAuthAccessToken, any Error> {
        if let inFlight { return inFlight }
        fetchCount += 1
        // Unstructured on purpose: the fetch serves every waiting caller and must not be cancelled with
        // the one that happened to start it.
        let task = Task { try await self.fetchAndStore() }
        inFlight = task
        return task
    }

    private func fetchAndStore() async throws -> OAuthAccessToken {
        defer { inFlight = nil }
        do {
            let token = try await fetcher()
            cached = token
            lastFailure = nil
            return token
        } catch {
            lastFailure = (error, now())
            throw error
        }
    }
}
