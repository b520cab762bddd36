/// When to retry a notification after a recoverable provider error (SPEC §8).
///
/// Exponential backoff: the n-th failure (n ≥ 1) waits `initialDelay × multiplier^(n-1)` (1, 2, 4, 8 … s),
/// capped at `maximumDelay`, with **proportional jitter**: the capped delay is multiplied by a uniform factor in
/// `[1 - jitter, 1 + jitter]` (±20 % by default) and capped again. With `multiplier = 2` and `jitter = 0.2`
/// successive ranges ([0.8, 1.2], [1.6, 2.4], …) do not overlap, so the schedule keeps growing while clients
/// failing together still spread out. This is neither "full jitter" (uniform in [0, d]) nor "equal jitter"
/// (d/2 + uniform in [0, d/2]): both may retry much earlier than the nominal delay.
///
/// Floors applied after jitter: never earlier than `Retry-After`, and at least `quotaMinimumDelay` (60 s) after
/// `QUOTA_EXCEEDED`. A `Retry-After` longer than `maximumDelay` is honoured (the cap is the backoff's, not the
/// server's).
///
/// Retries stop `deadline` (2 h) after the first failure: an attempt that would land later is not scheduled and
/// the caller discards. Times are seconds as `Double` from an injected clock.
public struct RetryPolicy: Sendable, Equatable {
    /// Delay after the first failure, seconds.
    public var initialDelay: Double
    /// Growth factor between successive delays.
    public var multiplier: Double
    /// Cap on one delay computed by backoff (not on `Retry-After`), seconds.
    public var maximumDelay: Double
    /// How long after the first failure attempts may still be made, seconds.
    public var deadline: Double
    /// Minimum delay after `QUOTA_EXCEEDED`, seconds.
    public var quotaMinimumDelay: Double
    /// Proportional jitter, 0 ... 1: the delay is multiplied by a uniform factor in `[1 - jitter, 1 + jitter]`.
    public var jitter: Double

    public init(
        initialDelay: Double = 1, multiplier: Double = 2, maximumDelay: Double = 600, deadline: Double = 7200,
        quotaMinimumDelay: Double = 60, jitter: Double = 0.2
    ) {
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maximumDelay = maximumDelay
        self.deadline = deadline
        self.quotaMinimumDelay = quotaMinimumDelay
        self.jitter = jitter
    }

    public static let standard = RetryPolicy()

    /// The nominal (unjittered) backoff after failure number `attempt` (1-based; values below 1 count as 1):
    /// `initialDelay × multiplier^(attempt-1)`, capped at `maximumDelay`. No overflow for any `attempt`.
    public func backoff(attempt: Int) -> Double {
        let cap = Self.sane(maximumDelay, fallback: 600)
        var delay = min(Self.sane(initialDelay, fallback: 1), cap)
        let factor = Self.sane(multiplier, fallback: 2)
        var step = 1
        while step < attempt, delay < cap, factor > 1 {
            delay *= factor
            step += 1
        }
        return min(delay, cap)
    }

    /// Seconds to wait before the next attempt after failure number `attempt` (1-based).
    ///
    /// - Parameters:
    ///   - retryAfter: the provider's `Retry-After`, in seconds from now (negative or NaN is ignored;
    ///     +infinity gives +infinity).
    ///   - quotaExceeded: the error was `QUOTA_EXCEEDED`: wait at least `quotaMinimumDelay`.
    public func delay(
        attempt: Int, retryAfter: Double?, quotaExceeded: Bool, random: inout some RandomNumberGenerator
    ) -> Double {
        let nominal = backoff(attempt: attempt)
        let spread = min(max(jitter.isFinite ? jitter : 0, 0), 1)
        var delay = nominal
        if spread > 0 { delay = nominal * Double.random(in: (1 - spread)...(1 + spread), using: &random) }
        delay = min(delay, Self.sane(maximumDelay, fallback: 600))
        if quotaExceeded { delay = max(delay, Self.sane(quotaMinimumDelay, fallback: 60)) }
        if let retryAfter, !retryAfter.isNaN, retryAfter > delay { delay = retryAfter }
        return delay
    }

    /// The absolute time of the next attempt after failure number `attempt` at `now`, or nil when it would be
    /// later than `firstFailureAt + deadline` (the caller discards).
    public func nextAttempt(
        firstFailureAt: Double, now: Double, attempt: Int, retryAfter: Double?, quotaExceeded: Bool,
        random: inout some RandomNumberGenerator
    ) -> Double? {
        let at = now + delay(attempt: attempt, retryAfter: retryAfter, quotaExceeded: quotaExceeded, random: &random)
        guard at.isFinite, at <= firstFailureAt + deadline else { return nil }
        return at
    }

    /// `value` when finite and non-negative, else `fallback` (a misconfigured policy must not loop or overflow).
    private static func sane(_ value: Double, fallback: Double) -> Double {
        value.isFinite && value >= 0 ? value : fallback
    }
}
