/// What one client can create in an app (SPEC §3), configurable per app under `quotas:` in its settings.
/// Beyond a limit the API answers `429 quota_exceeded` (`400` for a path with too many keys); refusals are
/// counted in `pushgateway_quota_refusals_total{quota}`.
///
/// Defaults, and why:
/// - `maxPathKeys` 32: real database paths are a handful of keys deep; every key is a trie node on every
///   replica that holds the app, so depth is memory.
/// - `maxSubscriptionsPerUser` 1,000: a user with a few devices watching a few hundred nodes each.
/// - `maxSubscriptionsPerDevice` 200: one push token watching 200 nodes (an anonymous v1 client is bounded
///   by this and the anonymous rate, since it has no uid).
/// - `maxSubscriptionsPerApp` 10,000,000: a ceiling against runaway growth; raise it for bigger apps.
/// - `anonymousWritesPerSecond` 100 with bursts of 1,000: anonymous v1 PUT/DELETE per app (a million devices
///   refreshing once a day average 12/s); beyond it `429` with `Retry-After`.
public struct AppQuotas: Decodable, Sendable, Equatable {
    public var maxPathKeys = 32
    public var maxSubscriptionsPerUser = 1_000
    public var maxSubscriptionsPerDevice = 200
    public var maxSubscriptionsPerApp = 10_000_000
    public var anonymousWritesPerSecond = 100.0
    public var anonymousWriteBurst = 1_000

    public init() {}

    enum CodingKeys: String, CodingKey {
        case maxPathKeys, maxSubscriptionsPerUser, maxSubscriptionsPerDevice, maxSubscriptionsPerApp
        case anonymousWritesPerSecond, anonymousWriteBurst
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        maxPathKeys = try c.decodeIfPresent(Int.self, forKey: .maxPathKeys) ?? maxPathKeys
        maxSubscriptionsPerUser = try c.decodeIfPresent(Int.self, forKey: .maxSubscriptionsPerUser) ?? maxSubscriptionsPerUser
        maxSubscriptionsPerDevice = try c.decodeIfPresent(Int.self, forKey: .maxSubscriptionsPerDevice) ?? maxSubscriptionsPerDevice
        maxSubscriptionsPerApp = try c.decodeIfPresent(Int.self, forKey: .maxSubscriptionsPerApp) ?? maxSubscriptionsPerApp
        anonymousWritesPerSecond = try c.decodeIfPresent(Double.self, forKey: .anonymousWritesPerSecond) ?? anonymousWritesPerSecond
        anonymousWriteBurst = try c.decodeIfPresent(Int.self, forKey: .anonymousWriteBurst) ?? anonymousWriteBurst
    }

    func validate() throws(ConfigurationError) {
        guard maxPathKeys > 0, maxSubscriptionsPerUser > 0, maxSubscriptionsPerDevice > 0, maxSubscriptionsPerApp > 0 else {
            throw ConfigurationError("quotas: every max… must be positive")
        }
        guard anonymousWritesPerSecond >= 0, anonymousWritesPerSecond.isFinite, anonymousWriteBurst > 0 else {
            throw ConfigurationError("quotas: anonymousWritesPerSecond must be >= 0 and anonymousWriteBurst positive")
        }
    }
}
