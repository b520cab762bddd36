import PushCore

/// One app's state within its partition (``PartitionContents``): the subscription index with its shadows,
/// and what the owner keeps beside it. Guarded by its partition's lock.
final class AppData {
    let name: String
    let index: AppIndex
    /// Nodes whose data was found over the app's limit (their subscriptions were revoked with `too_big`):
    /// subscribing there in `value`/`childEvent` mode is refused with 403 `too_big` until a write at or above
    /// the node replaces its data. Bounded.
    var oversized: Set<DataPath> = []
    static let maximumOversizedNodes = 10_000
    /// Subscriptions being created (their writes produced, not applied yet): counted by the quotas, so that
    /// concurrent creates cannot pass a limit together.
    private(set) var creating = 0
    private(set) var creatingByOwner: [ExactString: Int] = [:]
    private(set) var creatingByDevice: [DeviceKey: Int] = [:]

    func reserve(_ subscription: Subscription, by delta: Int) {
        creating += delta
        if let owner = subscription.settings.owner {
            let count = (creatingByOwner[owner] ?? 0) + delta
            creatingByOwner[owner] = count > 0 ? count : nil
        }
        let device = subscription.subscriber.device
        let count = (creatingByDevice[device] ?? 0) + delta
        creatingByDevice[device] = count > 0 ? count : nil
    }

    /// Subscriptions of the app, of `owner`, of `device`, those being created included.
    var subscriptionCount: Int { index.subscriptionCount + creating }
    func subscriptionCount(owner: String) -> Int {
        index.subscriptionCount(owner: owner) + (creatingByOwner[ExactString(owner)] ?? 0)
    }
    func subscriptionCount(device: DeviceKey) -> Int { index.subscriptionCount(device: device) + (creatingByDevice[device] ?? 0) }

    /// Anonymous v1 writes admitted (``AppQuotas/anonymousWritesPerSecond``).
    var anonymousWrites: TokenBucket?
    /// The rules fingerprint and shadow limit this app's subscriptions were last checked against on this
    /// replica (nil: never, e.g. just taken over), so that the revocation sweep re-checks only on a change.
    var checkedRules: String?
    var checkedShadowLimit: Int?
    var checkedEnabled: Bool?

    init(name: String) {
        self.name = name
        self.index = AppIndex(app: name)
    }

    func markOversized(_ path: DataPath) {
        if oversized.count < Self.maximumOversizedNodes { oversized.insert(path) }
    }

    /// A write at `path` replaced the data of every node at or below it.
    func dataReplaced(at path: DataPath) {
        guard !oversized.isEmpty else { return }
        oversized = oversized.filter { !path.isPrefix(of: $0) }
    }

    /// Takes a token from the app's anonymous-write bucket (`now` in seconds, monotonic).
    func admitAnonymousWrite(quotas: AppQuotas, now: Double) -> TokenBucket.Decision {
        if anonymousWrites == nil || anonymousWrites?.rate != quotas.anonymousWritesPerSecond
            || anonymousWrites?.burst != Double(quotas.anonymousWriteBurst)
        {
            anonymousWrites = TokenBucket(rate: quotas.anonymousWritesPerSecond, burst: quotas.anonymousWriteBurst)
        }
        return anonymousWrites?.take(now: now) ?? .admitted
    }
}
