import PushCore
import Synchronization

/// The current settings of every configured app (``AppProfile``), by app id bytes. The settings reloader is
/// its only writer; everything else reads a consistent profile per request or event. Apps without settings
/// are not served, but their subscriptions stay stored (see ``AppSettingsReloader``).
public final class AppProfiles: Sendable {
    private let profiles = Mutex<[ExactString: AppProfile]>([:])
    /// Bumped on every change, so that the revocation sweep can notice one cheaply.
    private let changes = Atomic<UInt64>(0)

    public init() {}

    /// A registry of apps with fixed settings (tests). Apps with FCM credentials are refused.
    public convenience init(apps: [String: AppSettings]) throws {
        self.init()
        let builder = AppProfileBuilder(httpClient: nil, fcm: .init(), logger: .init(label: "test"))
        for (name, settings) in apps { set(name, try builder.build(name: name, settings: settings, previous: nil)) }
    }

    /// The app's settings now; nil when the app is not configured.
    public func profile(_ app: String) -> AppProfile? { profiles.withLock { $0[ExactString(app)] } }

    func set(_ app: String, _ profile: AppProfile?) {
        profiles.withLock { $0[ExactString(app)] = profile }
        changes.add(1, ordering: .releasing)
    }

    var generation: UInt64 { changes.load(ordering: .acquiring) }

    /// Names of the configured apps, sorted by bytes.
    public var names: [String] { profiles.withLock { $0.keys.sorted().map(\.string) } }
}
