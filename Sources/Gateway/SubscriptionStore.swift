import PushCore
import Synchronization

/// One app's index behind its own lock: API calls and event processing of different apps never contend.
public final class AppState: Sendable {
    public let name: String
    public let settings: AppSettings
    private let index: Mutex<AppIndex>

    init(name: String, settings: AppSettings) {
        self.name = name
        self.settings = settings
        self.index = Mutex(AppIndex(app: name))
    }

    /// Runs `body` with exclusive access to the app's index.
    public func withIndex<Result: Sendable>(_ body: (AppIndex) throws -> Result) rethrows -> Result {
        try index.withLock { index in try body(index) }
    }
}

/// The subscriptions of every configured app.
public final class SubscriptionStore: Sendable {
    private let apps: [String: AppState]

    public init(apps: [String: AppSettings]) {
        var states: [String: AppState] = [:]
        for (name, settings) in apps { states[name] = AppState(name: name, settings: settings) }
        self.apps = states
    }

    public func app(_ name: String) -> AppState? { apps[name] }

    public var appNames: [String] { apps.keys.sorted() }

    /// Total subscriptions and shadows (for the gauges).
    public func counts() -> (subscriptions: Int, shadowsKept: Int, shadowsSeeded: Int) {
        var subscriptions = 0
        var kept = 0
        var seeded = 0
        for state in apps.values {
            let (count, shadows) = state.withIndex { index in (index.subscriptionCount, index.shadowCounts()) }
            subscriptions += count
            kept += shadows.kept
            seeded += shadows.seeded
        }
        return (subscriptions, kept, seeded)
    }
}
