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

    /// The write-rate buckets (``AppQuotas``): the app's anonymous backstop, per client address, per device,
    /// per uid. Bounded (``RateTable``); rebuilt when the app's settings change them.
    var anonymousWrites: RateTable?
    var clientWrites: RateTable?
    var deviceWrites: RateTable?
    var userWrites: RateTable?
    /// The rules fingerprint and shadow limit this app's subscriptions were last checked against on this
    /// replica (nil: never, e.g. just taken over), so that the revocation sweep re-checks only on a change.
    var checkedRules: String?
    var checkedShadowLimit: Int?
    var checkedEnabled: Bool?

    /// `partition`: the meter of the partition's bytes (``StateBudget``); the app's index adds into it through
    /// its own meter.
    init(name: String, partition: ByteMeter? = nil) {
        self.name = name
        self.index = AppIndex(app: name, meter: ByteMeter(parent: partition))
    }

    func markOversized(_ path: DataPath) {
        if oversized.count < Self.maximumOversizedNodes { oversized.insert(path) }
    }

    /// A write at `path` replaced the data of every node at or below it.
    func dataReplaced(at path: DataPath) {
        guard !oversized.isEmpty else { return }
        oversized = oversized.filter { !path.isPrefix(of: $0) }
    }

    /// What a write spends, by kind (``admitWrite(_:quotas:now:)``).
    enum WriteCost {
        /// An anonymous v1 write that changes state: the client's, the device's and the app's buckets.
        case anonymous(client: String, device: DeviceKey)
        /// An anonymous v1 DELETE that removes nothing: the client's bucket only.
        case anonymousNothing(client: String)
        /// A v1 write with a token: the uid's bucket.
        case user(uid: String)
    }

    /// Takes a token from every bucket `cost` names when each has one (nothing is taken otherwise); else the
    /// quota that refused (`client_rate`, `device_rate`, `anonymous_rate`, `user_rate`) and the seconds until
    /// all of them would admit. `now` in seconds, monotonic.
    func admitWrite(_ cost: WriteCost, quotas: AppQuotas, now: Double) -> (quota: String, retryAfter: Double)? {
        func table(_ table: inout RateTable?, rate: Double, burst: Int) {
            if table == nil || table?.rate != rate || table?.burst != Double(burst) {
                table = RateTable(rate: rate, burst: burst)
            }
        }
        switch cost {
        case .anonymous(let client, let device):
            table(&clientWrites, rate: quotas.clientWritesPerSecond, burst: quotas.clientWriteBurst)
            table(&deviceWrites, rate: quotas.deviceWritesPerSecond, burst: quotas.deviceWriteBurst)
            table(&anonymousWrites, rate: quotas.anonymousWritesPerSecond, burst: quotas.anonymousWriteBurst)
            let waits = [
                ("client_rate", clientWrites?.wait(ExactString(client), now: now) ?? 0),
                ("device_rate", deviceWrites?.wait(device, now: now) ?? 0),
                ("anonymous_rate", anonymousWrites?.wait(0, now: now) ?? 0),
            ]
            if let refused = waits.first(where: { $0.1 > 0 }) { return (refused.0, waits.map(\.1).max() ?? refused.1) }
            clientWrites?.take(ExactString(client), now: now)
            deviceWrites?.take(device, now: now)
            anonymousWrites?.take(0, now: now)
        case .anonymousNothing(let client):
            table(&clientWrites, rate: quotas.clientWritesPerSecond, burst: quotas.clientWriteBurst)
            if let wait = clientWrites?.wait(ExactString(client), now: now), wait > 0 { return ("client_rate", wait) }
            clientWrites?.take(ExactString(client), now: now)
        case .user(let uid):
            table(&userWrites, rate: quotas.userWritesPerSecond, burst: quotas.userWriteBurst)
            if let wait = userWrites?.wait(ExactString(uid), now: now), wait > 0 { return ("user_rate", wait) }
            userWrites?.take(ExactString(uid), now: now)
        }
        return nil
    }
}
