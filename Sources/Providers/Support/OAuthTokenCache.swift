import Synchronization

/// Caches the OAuth2 access token of one provider account (an FCM service account, an HMS app) and renews it
/// before it expires.
///
/// - A cached token is used until `refreshMargin` (default 5 min, at most half the token's lifetime) before
///   its expiry; then one refresh starts. Until the old token is really about to expire, callers keep using
///   it and do not wait for the refresh.
/// - Concurrent callers share one in-flight fetch, which is not cancelled when a waiting caller is.
/// - A failed fetch is remembered for `failureBackoff` (default 1 s): callers fail fast with the same error
///   instead of hammering the token endpoint.
/// - ``invalidate(_:)`` drops a token the provider refused, so the next call fetches a fresh one.
/// - ``freshToken()`` reads a cached token that needs no refresh without entering the actor (no hop on every
///   send); everything else goes through ``accessToken()``.
public actor OAuthTokenCache<Failure: ProviderFailure> {
    /// A token is never handed out this close to its expiry (capped at half its lifetime).
    static var expirySafetySeconds: Double { 10.0 }

    private let fetcher: @Sendable () async throws(Failure) -> OAuthAccessToken
    private let now: @Sendable () -> Double
    private let refreshMargin: Double
    private let failureBackoff: Double

    private var cached: OAuthAccessToken? {
        didSet { fresh.withLock { $0 = cached.map { ($0.value, refreshTime(of: $0)) } } }
    }
    /// The cached token and the time its refresh is due, readable from outside the actor.
    private nonisolated let fresh = Mutex<(value: String, refreshAt: Double)?>(nil)
    private var inFlight: Task<OAuthAccessToken, any Error>?
    private var lastFailure: (error: Failure, at: Double)?

    /// How many fetches were started (for tests and metrics).
    public private(set) var fetchCount = 0

    /// A manager over any fetch function (tests inject one with a manual clock).
    init(
        refreshMargin: Duration,
        failureBackoff: Duration,
        now: @escaping @Sendable () -> Double,
        fetch: @escaping @Sendable () async throws(Failure) -> OAuthAccessToken
    ) {
        self.fetcher = fetch
        self.now = now
        self.refreshMargin = refreshMargin.seconds
        self.failureBackoff = failureBackoff.seconds
    }

    /// The cached token while no refresh is due, read without entering the actor; nil otherwise (then call
    /// ``accessToken()``).
    public nonisolated func freshToken() -> String? {
        guard let fresh = fresh.withLock({ $0 }), now() < fresh.refreshAt else { return nil }
        return fresh.value
    }

    /// A valid access token, from the cache or freshly fetched. Errors have source `.authentication`
    /// (or `.cancelled`).
    public func accessToken() async throws(Failure) -> String {
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
        } catch let error as Failure {
            throw error
        } catch {
            throw Failure.tokenFailure(OAuthTokenFailure(message: "token fetch failed: \(error)"))
        }
    }

    /// Forgets `token` if it is the cached one (the provider refused it). A newer token is kept.
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
