/// Token buckets per key (a client address, a device, a uid): `rate` tokens per second up to `burst` for
/// each key, in bounded memory.
///
/// - A key is stored as its hash (64 bits, the process's random seed), so a 1 KB device id costs no more than a
///   short one; two keys that collide (about 1 in 10¹¹ for 10,000 keys) share a bucket.
/// - Only keys that spent a token are stored: a key never seen, or whose bucket has refilled, is a full bucket.
/// - At most `capacity` keys, in two generations: when the current one holds `capacity / 2` keys it becomes the
///   previous one and the older generation is dropped. A dropped key starts again from a full bucket; dropping
///   a key that is still draining needs `capacity / 2` other keys to spend tokens meanwhile (each of them
///   admitted by every other limit), so inventing keys buys an attacker at most one burst per key per
///   generation, never unbounded memory. O(1) per call.
public struct RateTable: Sendable {
    public let rate: Double
    public let burst: Double
    public let capacity: Int

    private struct Level: Sendable {
        var tokens: Double
        var at: Double
    }

    private var current: [Int: Level] = [:]
    private var previous: [Int: Level] = [:]

    public init(rate: Double, burst: Int, capacity: Int = 10_000) {
        self.rate = max(rate, 0)
        self.burst = Double(max(burst, 1))
        self.capacity = max(capacity, 2)
    }

    /// Keys tracked now (at most `capacity`).
    public var count: Int { current.count + previous.count }

    private func level(_ key: Int, now: Double) -> Double {
        guard let stored = current[key] ?? previous[key] else { return burst }
        guard now > stored.at else { return stored.tokens }
        return min(burst, stored.tokens + (now - stored.at) * rate)
    }

    /// Seconds until `key` has a token (0: it has one now), without taking it.
    public func wait(_ key: some Hashable, now: Double) -> Double {
        let tokens = level(key.hashValue, now: now)
        if tokens >= 1 { return 0 }
        guard rate > 0 else { return .infinity }
        return (1 - tokens) / rate
    }

    /// Takes a token of `key` (call after ``wait(_:now:)`` said 0; a bucket never goes below empty).
    public mutating func take(_ key: some Hashable, now: Double) {
        let hash = key.hashValue
        let tokens = max(0, level(hash, now: now) - 1)
        let at = max(now, (current[hash] ?? previous[hash])?.at ?? now)
        previous[hash] = nil
        if current[hash] == nil, current.count >= capacity / 2 {
            previous = current
            current = [:]
        }
        current[hash] = Level(tokens: tokens, at: at)
    }
}
