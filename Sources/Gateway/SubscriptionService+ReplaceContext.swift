import GatewayAPI
import GatewayCore
import PushCore

/// v2 token replacement (`POST /datasync/v2/{app}/subscriptions/{uid}/.replace-context`): a device's push token
/// rotated, and every subscription of the user on the old token moves to the new one in one decision.
extension SubscriptionService {
    /// One decision under the partition's lock, made once no write about any subscription of the user on either
    /// token is in flight (``PartitionState/write(concerning:_:)``). For each subscription of (`uid`, `kind`,
    /// `oldContext`): a record of the same subscription on `newContext` (same path, mode, format, expiry: a move
    /// is not a refresh), unless the new token already has it (that one is kept as it is), then the old one's
    /// tombstone. All the creates are produced before all the tombstones, so an event matched between their
    /// acknowledgements reaches the device through one token or both (a duplicate), never through none. The call
    /// answers once every record is stored and applied; if some fail, the call fails (503, or 504 when one may
    /// have been stored) and each failed record is repaired from memory: repeating the call finishes the move.
    ///
    /// Checks, all or nothing: the read rules with the caller's token for every moved path (403), and the
    /// per-device quota of the new token for the subscriptions it gains (429); the per-app and per-user counts
    /// cannot grow (each create has its tombstone), so they are not checked. The new subscriptions' bytes are
    /// reserved as a create's (both are held until the tombstones apply).
    func replaceContext(_ caller: V2Caller, request: V2ReplaceContextRequest) async throws(APIError) -> V2ReplaceContextOutcome {
        let (name, uid, token) = (caller.app, caller.uid, caller.token)
        let (partition, profile) = try writable(caller)
        let old = SubscriberKey(kind: request.kind, token: request.oldContext, uid: uid)
        let new = SubscriberKey(kind: request.kind, token: request.newContext, uid: uid)
        var reservation: StateBudget.Reservation?
        defer { reservation?.release() }
        return try await partition.write(concerning: { $0.app.bytesEqual(name) && ($0.subscriber == old || $0.subscriber == new) }) {
            (contents) throws(APIError) -> (records: [StateRecord], value: V2ReplaceContextOutcome) in
            let app = contents.app(name)
            let mine = app.index.subscriptions(ofUser: uid)
            // The same token twice: nothing moves (the answer lists the token's subscriptions).
            let moving = old == new ? [] : mine.filter { $0.subscriber == old }
            var onNew = mine.filter { $0.subscriber == new }
            var creates: [Subscription] = []
            var moved: [(from: Subscription, to: Subscription)] = []
            for subscription in moving {
                if let kept = onNew.first(where: { $0.path == subscription.path }) {
                    moved.append((subscription, kept))
                    continue
                }
                try checkAccess(app: app, profile: profile, path: subscription.path, mode: subscription.settings.mode, token: token)
                let created = Subscription(path: subscription.path, subscriber: new, settings: subscription.settings)
                creates.append(created)
                moved.append((subscription, created))
            }
            if !creates.isEmpty {
                let limit = profile.settings.quotas.maxSubscriptionsPerDevice
                if app.subscriptionCount(device: new.device) + creates.count > limit {
                    metrics.quotaRefused("device")
                    throw .quotaExceeded(
                        "the new push token would have more than its limit of \(limit) subscriptions: nothing was moved")
                }
                reservation = try reserveBytes(app: app, profile: profile, creates)
            }
            onNew += creates
            onNew.sort { $0.path.description.utf8.lexicographicallyPrecedes($1.path.description.utf8) }
            let position = Dictionary(onNew.enumerated().map { ($1.path, $0) }, uniquingKeysWith: { first, _ in first })
            moved.sort { (position[$0.to.path] ?? 0) < (position[$1.to.path] ?? 0) }
            let records: [StateRecord] =
                creates.map { .subscription(SubscriptionRecord(app: name, subscription: $0)) }
                + moving.map { .subscription(.deletion(app: name, path: $0.path, subscriber: old)) }
            let outcome = V2ReplaceContextOutcome(
                subscriptions: onNew.map { document(app: name, $0) },
                moved: moved.map {
                    .init(
                        from: SubscriptionID.make(app: name, path: $0.from.path, subscriber: old),
                        to: SubscriptionID.make(app: name, path: $0.to.path, subscriber: new))
                })
            return (records, outcome)
        }
    }

    /// Reserves the bytes of several creates at once (``reserveBytes(app:profile:_:)``): each counted as if it
    /// were the only one, so a token shared by them is counted more than once (an overestimate, released once the
    /// records are applied).
    private func reserveBytes(app: AppData, profile: AppProfile, _ subscriptions: [Subscription]) throws(APIError) -> StateBudget.Reservation? {
        guard let meter = app.index.meter else { return nil }
        let bytes = subscriptions.reduce(0) { total, subscription in
            total + app.index.bytesToSubscribe(path: subscription.path, subscriber: subscription.subscriber, settings: subscription.settings)
        }
        switch store.budget.reserve(bytes, app: meter, appLimit: profile.settings.quotas.maxStateBytes) {
        case .success(let reservation): return reservation
        case .failure(let refusal):
            metrics.quotaRefused(refusal.quota)
            throw refusal.error
        }
    }
}
