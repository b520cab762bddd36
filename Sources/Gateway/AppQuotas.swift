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
/// - `maxStateBytes` 256 MiB: the estimated memory of the app's subscriptions and shadows on each replica that
///   holds them (``AppIndex/byteCount``). A typical subscription (short path, 160-byte FCM token) costs about
///   0.5 KB, so this is about 500,000 of them; one made of a 2 KB path and a 1 KB invented device id costs
///   about 3.7 KB, so anonymous abuse stops at about 70,000: a fifth of a 2 GiB replica's 1.2 GiB mark, so
///   one app cannot take a replica's memory from the others. Raise it for bigger apps (and the replica's
///   memory with it).
/// - Anonymous v1 writes (PUT and DELETE without a token) must be admitted by two buckets, one per client
///   address (`clientWritesPerSecond` 50, bursts of 500: a NAT gateway or a proxy without
///   `http.trustedProxies` puts many devices behind one address) and one per device id
///   (`deviceWritesPerSecond` 5, bursts of 200: a device re-subscribing to everything it may hold at once),
///   and by the app's backstop (`anonymousWritesPerSecond` 1,000 with bursts of 10,000: a million devices
///   refreshing once a day average 12/s; it only stops a flood spread over many addresses). Beyond: `429`
///   with `Retry-After`. A DELETE that removes nothing spends from the client's bucket only (it writes
///   nothing, but is not free to repeat).
/// - v1 writes with a token: one bucket per uid (`userWritesPerSecond` 20, bursts of 1,000: a user's devices
///   refreshing every subscription it may hold at once).
/// - Tokens are spent only by writes otherwise accepted (authenticated, allowed by the rules, owner and
///   quotas), so refused calls drain nothing.
public struct AppQuotas: Decodable, Sendable, Equatable {
    public var maxPathKeys = 32
    public var maxSubscriptionsPerUser = 1_000
    public var maxSubscriptionsPerDevice = 200
    public var maxSubscriptionsPerApp = 10_000_000
    public var maxStateBytes = 256 * 1024 * 1024
    public var anonymousWritesPerSecond = 1_000.0
    public var anonymousWriteBurst = 10_000
    public var clientWritesPerSecond = 50.0
    public var clientWriteBurst = 500
    public var deviceWritesPerSecond = 5.0
    public var deviceWriteBurst = 200
    public var userWritesPerSecond = 20.0
    public var userWriteBurst = 1_000

    public init() {}

    enum CodingKeys: String, CodingKey {
        case maxPathKeys, maxSubscriptionsPerUser, maxSubscriptionsPerDevice, maxSubscriptionsPerApp, maxStateBytes
        case anonymousWritesPerSecond, anonymousWriteBurst, clientWritesPerSecond, clientWriteBurst
        case deviceWritesPerSecond, deviceWriteBurst, userWritesPerSecond, userWriteBurst
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        maxPathKeys = try c.decodeIfPresent(Int.self, forKey: .maxPathKeys) ?? maxPathKeys
        maxSubscriptionsPerUser = try c.decodeIfPresent(Int.self, forKey: .maxSubscriptionsPerUser) ?? maxSubscriptionsPerUser
        maxSubscriptionsPerDevice = try c.decodeIfPresent(Int.self, forKey: .maxSubscriptionsPerDevice) ?? maxSubscriptionsPerDevice
        maxSubscriptionsPerApp = try c.decodeIfPresent(Int.self, forKey: .maxSubscriptionsPerApp) ?? maxSubscriptionsPerApp
        maxStateBytes = try c.decodeIfPresent(Int.self, forKey: .maxStateBytes) ?? maxStateBytes
        anonymousWritesPerSecond = try c.decodeIfPresent(Double.self, forKey: .anonymousWritesPerSecond) ?? anonymousWritesPerSecond
        anonymousWriteBurst = try c.decodeIfPresent(Int.self, forKey: .anonymousWriteBurst) ?? anonymousWriteBurst
        clientWritesPerSecond = try c.decodeIfPresent(Double.self, forKey: .clientWritesPerSecond) ?? clientWritesPerSecond
        clientWriteBurst = try c.decodeIfPresent(Int.self, forKey: .clientWriteBurst) ?? clientWriteBurst
        deviceWritesPerSecond = try c.decodeIfPresent(Double.self, forKey: .deviceWritesPerSecond) ?? deviceWritesPerSecond
        deviceWriteBurst = try c.decodeIfPresent(Int.self, forKey: .deviceWriteBurst) ?? deviceWriteBurst
        userWritesPerSecond = try c.decodeIfPresent(Double.self, forKey: .userWritesPerSecond) ?? userWritesPerSecond
        userWriteBurst = try c.decodeIfPresent(Int.self, forKey: .userWriteBurst) ?? userWriteBurst
    }

    func validate() throws(ConfigurationError) {
        guard maxPathKeys > 0, maxSubscriptionsPerUser > 0, maxSubscriptionsPerDevice > 0, maxSubscriptionsPerApp > 0,
            maxStateBytes > 0
        else {
            throw ConfigurationError("quotas: every max… must be positive")
        }
        let rates: [(String, Double, Int)] = [
            ("anonymousWrites", anonymousWritesPerSecond, anonymousWriteBurst), ("clientWrites", clientWritesPerSecond, clientWriteBurst),
            ("deviceWrites", deviceWritesPerSecond, deviceWriteBurst), ("userWrites", userWritesPerSecond, userWriteBurst),
        ]
        for (name, rate, burst) in rates {
            guard rate >= 0, rate.isFinite, burst > 0 else {
                throw ConfigurationError("quotas: \(name)PerSecond must be a finite number >= 0 and the burst positive")
            }
        }
    }
}
