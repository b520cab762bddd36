import PushCore
import Synchronization

/// One app's index behind its own lock (API calls and event processing of different apps never contend),
/// and its current settings. An app whose settings are missing (or were removed) keeps its index: its
/// subscriptions stay stored and come back when its settings do.
public final class AppState: Sendable {
    public let name: String
    private let index: Mutex<AppIndex>
    private let current = Mutex<AppProfile?>(nil)
    /// Nodes whose data was found over the app's limit (their subscriptions were revoked with `too_big`):
    /// subscribing there in `value`/`childEvent` mode is refused with 403 `too_big` until a write at or above
    /// the node replaces its data. In memory, bounded.
    private let oversized = Mutex<Set<DataPath>>([])
    static let maximumOversizedNodes = 10_000
    /// Anonymous v1 writes admitted (``AppQuotas/anonymousWritesPerSecond``); rebuilt when the quota changes.
    private let anonymousWrites = Mutex<TokenBucket?>(nil)

    init(name: String) {
        self.name = name
        self.index = Mutex(AppIndex(app: name))
    }

    /// The app's settings now; nil when the app is not configured.
    public var profile: AppProfile? { current.withLock { $0 } }

    func setProfile(_ profile: AppProfile?) { current.withLock { $0 = profile } }

    func markOversized(_ path: DataPath) {
        oversized.withLock { set in
            if set.count < Self.maximumOversizedNodes { set.insert(path) }
        }
    }

    func isOversized(_ path: DataPath) -> Bool { oversized.withLock { $0.contains(path) } }

    /// Takes a token from the app's anonymous-write bucket (`now` in seconds, monotonic).
    func admitAnonymousWrite(quotas: AppQuotas, now: Double) -> TokenBucket.Decision {
        anonymousWrites.withLock { bucket in
            if bucket == nil || bucket?.rate != quotas.anonymousWritesPerSecond
                || bucket?.burst != Double(quotas.anonymousWriteBurst)
            {
                bucket = TokenBucket(rate: quotas.anonymousWritesPerSecond, burst: quotas.anonymousWriteBurst)
            }
            return bucket?.take(now: now) ?? .admitted
        }
    }

    /// A write at `path` replaced the data of every node at or below it.
    func dataReplaced(at path: DataPath) {
        oversized.withLock { set in
            guard !set.isEmpty else { return }
            set = set.filter { !$0.segments.starts(with: path.segments) }
        }
    }

    /// Runs `body` with exclusive access to the app's index.
    public func withIndex<Result: Sendable>(_ body: (AppIndex) throws -> Result) rethrows -> Result {
        try index.withLock { index in try body(index) }
    }
}

/// The subscriptions of every app seen in the state topic or in the settings.
public final class SubscriptionStore: Sendable {
    /// By app id bytes (``ExactString``).
    private let states = Mutex<[ExactString: AppState]>([:])

    public init() {}

    /// A store of apps with fixed settings (tests). Apps with FCM credentials are refused.
    public convenience init(apps: [String: AppSettings]) throws {
        self.init()
        let builder = AppProfileBuilder(httpClient: nil, fcm: .init(), logger: .init(label: "test"))
        for (name, settings) in apps {
            state(name).setProfile(try builder.build(name: name, settings: settings, previous: nil))
        }
    }

    /// The state of a configured app; nil when the app has no settings.
    public func app(_ name: String) -> AppState? {
        guard let state = states.withLock({ $0[ExactString(name)] }), state.profile != nil else { return nil }
        return state
    }

    /// The state of `name`, created when missing (the state topic may hold apps not configured yet).
    func state(_ name: String) -> AppState {
        states.withLock { states in
            if let state = states[ExactString(name)] { return state }
            let state = AppState(name: name)
            states[ExactString(name)] = state
            return state
        }
    }

    /// Every app with an index or settings.
    public var appNames: [String] { states.withLock { $0.keys.sorted().map(\.string) } }

    /// Names of the configured apps.
    public var configuredAppNames: [String] {
        states.withLock { $0.values.filter { $0.profile != nil }.map(\.name).sorted() }
    }

    /// Total subscriptions and shadows (for the gauges).
    public func counts() -> (subscriptions: Int, shadowsKept: Int, shadowsSeeded: Int) {
        var subscriptions = 0
        var kept = 0
        var seeded = 0
        for state in states.withLock({ Array($0.values) }) {
            let (count, shadows) = state.withIndex { index in (index.subscriptionCount, index.shadowCounts()) }
            subscriptions += count
            kept += shadows.kept
            seeded += shadows.seeded
        }
        return (subscriptions, kept, seeded)
    }
}
