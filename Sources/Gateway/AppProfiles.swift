import PushCore
import Synchronization

/// The current settings of every configured app (``AppProfile``), by app id bytes. The settings reloader is
/// its only writer; everything else reads a consistent profile per request or event. Apps without settings
/// are not served, but their subscriptions stay stored (see ``AppSettingsReloader``).
///
/// On the event and delivery paths the profiles are read through a ``Reader`` that one owner keeps (a partition
/// worker, a delivery lane): it takes this lock only after a change, so those paths share no lock here.
public final class AppProfiles: Sendable {
    private let profiles = Mutex<[ExactString: AppProfile]>([:])
    /// Bumped on every change, after the map is written (releasing): a reader that sees the new value (acquiring)
    /// sees the change (``Reader``).
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

    /// Every app's profile now, with the generation it is at least as new as (read before the map: a change made
    /// meanwhile is in the map, or bumps the generation past the one returned, or both).
    fileprivate func snapshot() -> (generation: UInt64, profiles: [ExactString: AppProfile]) {
        let generation = self.generation
        return (generation, profiles.withLock { $0 })
    }

    /// The profiles as one owner last read them: a lookup compares the shared generation (an atomic load, no lock)
    /// with the one it saw, and reads the shared map again (under its lock) only when it changed. A change made by
    /// ``AppProfiles/set(_:_:)`` is seen by the first lookup that starts after `set` returned.
    ///
    /// It keeps the whole map, not the apps it was asked about: the map is shared copy-on-write (a refresh takes
    /// the lock and a reference, copies nothing), lookups of unknown apps (an event of an app without settings)
    /// grow nothing, and a removed app is gone at the next lookup like a changed one. A settings change copies the
    /// shared map once while readers hold it (O(apps), rare).
    ///
    /// Not thread-safe: one owner uses it, one lookup at a time (a partition worker: ``PartitionWorkers/Local``;
    /// a delivery lane: under the lane's lock).
    final class Reader {
        let shared: AppProfiles
        private var seen: UInt64
        private var profiles: [ExactString: AppProfile]
        /// How many times the shared map was read (under its lock): once at start, then once per change seen.
        private(set) var refreshes = 1

        init(_ shared: AppProfiles) {
            self.shared = shared
            (seen, profiles) = shared.snapshot()
        }

        /// `app`'s settings now; nil when it is not configured.
        func profile(_ app: String) -> AppProfile? {
            if shared.generation != seen {
                (seen, profiles) = shared.snapshot()
                refreshes += 1
            }
            return profiles[ExactString(app)]
        }
    }
}
