/// A token bucket: `rate` tokens per second up to `burst`; each admitted request takes one. Time is passed
/// in (seconds, any monotonic origin), so it is deterministic in tests.
public struct TokenBucket: Sendable {
    public let rate: Double
    public let burst: Double
    private var tokens: Double
    private var updatedAt: Double?
    private static let rounding = 1e-9

    public init(rate: Double, burst: Int) {
        self.rate = max(rate, 0)
        self.burst = Double(max(burst, 1))
        self.tokens = self.burst
    }

    public enum Decision: Sendable, Equatable {
        case admitted
        /// Refused: a token is available again after this many seconds.
        case refused(retryAfter: Double)
    }

    /// Takes a token at time `now` when one is available.
    public mutating func take(now: Double) -> Decision {
        if let last = updatedAt {
            if now > last {
                tokens = min(burst, tokens + (now - last) * rate)
                updatedAt = now
            }
        } else {
            updatedAt = now
        }
        // Within rounding of one token: at ``nextTokenAt`` the refill may come out a hair under 1.
        if tokens >= 1 - Self.rounding {
            tokens -= 1
            return .admitted
        }
        guard rate > 0 else { return .refused(retryAfter: .infinity) }
        return .refused(retryAfter: (1 - tokens) / rate)
    }

    /// When the next ``take(now:)`` is admitted, on the clock of the calls so far (at or before the last call
    /// when a token is there; `-infinity` before the first call; `infinity` when none ever comes).
    public var nextTokenAt: Double {
        guard let updatedAt else { return -.infinity }
        if tokens >= 1 - Self.rounding { return updatedAt }
        guard rate > 0 else { return .infinity }
        return updatedAt + (1 - tokens) / rate
    }
}
