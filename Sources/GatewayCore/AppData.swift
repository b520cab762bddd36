import PushCore

/// One app's state within its partition (``PartitionContents``): the subscription index with its shadows,
/// and what the owner keeps beside it. Guarded by its partition's lock.
public final class AppData {
    public let name: String
    public let index: AppIndex
    /// Nodes whose data was found over the app's limit (their subscriptions were revoked with `too_big`):
    /// subscribing there in `value`/`childEvent` mode is refused with 403 `too_big` until a write at or above
    /// the node replaces its data. Bounded.
    public var oversized: Set<DataPath> = []
    public static let maximumOversizedNodes = 10_000
    /// Subscriptions being created (their writes produced, not applied yet): counted by the quotas, so that
    /// concurrent creates cannot pass a limit together.
    public private(set) var creating = 0
    public private(set) var creatingByOwner: [ExactString: Int] = [:]
    public private(set) var creatingByDevice: [DeviceKey: Int] = [:]

    public func reserve(_ subscription: Subscription, by delta: Int) {
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
    public var subscriptionCount: Int { index.subscriptionCount + creating }
    public func subscriptionCount(owner: String) -> Int {
        index.subscriptionCount(owner: owner) + (creatingByOwner[ExactString(owner)] ?? 0)
    }
    public func subscriptionCount(device: DeviceKey) -> Int { index.subscriptionCount(device: device) + (creatingByDevice[device] ?? 0) }

    /// The write-rate buckets (``AppQuotas``): the app's anonymous backstop, per client address, per device,
    /// per uid. Bounded (``RateTable``); rebuilt when the app's settings change them.
    public var anonymousWrites: RateTable?
    public var clientWrites: RateTable?
    public var deviceWrites: RateTable?
    public var userWrites: RateTable?
    /// The rules fingerprint and shadow limit this app's subscriptions were last checked against on this
    /// replica (nil: never, e.g. just taken over), so that the revocation sweep re-checks only on a change.
    public var checkedRules: String?
    public var checkedShadowLimit: Int?
    public var checkedEnabled: Bool?

    /// `partition`: the meter of the partition's bytes (``StateBudget``); the app's index adds into it through
    /// its own meter.
    public init(name: String, partition: ByteMeter? = nil) {
        self.name = name
        self.index = AppIndex(app: name, meter: ByteMeter(parent: partition))
    }

    public func markOversized(_ path: DataPath) {
        if oversized.count < Self.maximumOversizedNodes { oversized.insert(path) }
    }

    /// A write at `path` replaced the data of every node at or below it.
    public func dataReplaced(at path: DataPath) {
        guard !oversized.isEmpty else { return }
        oversized = oversized.filter { !path.isPrefix(of: $0) }
    }
}
