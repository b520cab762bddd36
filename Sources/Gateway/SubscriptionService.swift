import GatewayCore
import Auth
import Foundation
import GatewayAPI
import GatewayLogging
import Logging
import PushCore
import PushFormats
import Rules

/// The REST API's operations (v1 and v2), answered by the replica that owns the app's partition (other
/// replicas forward the call here: ``RequestRouter``). Every decision is made under the partition's lock
/// on the state all earlier writes produced, and a write answers once it is durable and applied
/// (``PartitionState/write(identity:_:)``): a read that follows, through any replica, sees it.
struct SubscriptionService: SubscriptionAPI, V2SubscriptionAPI {
    let store: StateStore
    let profiles: AppProfiles
    let snapshots: (any SnapshotRequester)?
    let metrics: GatewayMetrics
    let logger: Logger
    /// Writes fail fast (503 with `Retry-After`) while Kafka cannot take them.
    var kafka: KafkaHealth? = nil

    private var now: Int64 { Int64(Date().timeIntervalSince1970) }

    /// For a write: like ``app(_:)``, and 503 at once while Kafka cannot take writes (no call waits for an
    /// outage to end).
    func writableApp(_ name: String) throws(APIError) -> (PartitionState, AppProfile) {
        let found = try app(name)
        try checkWritable()
        return found
    }

    /// 503 at once while Kafka cannot take writes.
    func checkWritable() throws(APIError) {
        if let reason = kafka?.notWritableReason {
            throw .unavailable("cannot store changes now: \(reason); retry later", retryAfterSeconds: 5)
        }
    }

    /// The app's settings and its partition: 404/403 for an unknown or disabled app, 503 when this replica
    /// does not own the partition (a rebalance: the caller retries).
    func app(_ name: String) throws(APIError) -> (PartitionState, AppProfile) {
        guard let profile = profiles.profile(name) else { throw .namespaceDoesNotExist(name) }
        guard profile.enabled else { throw .disabled(name) }
        guard let partition = store.servingPartition(ofApp: name) else {
            throw .notOwner("the application's partition is not served here right now; retry")
        }
        return (partition, profile)
    }

    // MARK: Authentication and rules

    /// Verifies an auth token: 401 when it is forged, expired or cannot be verified.
    func verify(_ token: String, profile: AppProfile) throws(APIError) -> VerifiedToken {
        guard let verifier = profile.verifier else {
            metrics.authFailure(reason: "no_keys")
            throw .unauthorized("application '\(profile.name.prefix(128))' has no auth keys: tokens cannot be verified")
        }
        do {
            return try verifier.verify(token, now: now)
        } catch {
            metrics.authFailure(reason: "invalid_token")
            throw .unauthorized("invalid auth token: \(error.description)")
        }
    }

    /// v2: a bearer token whose uid is the path's uid (compared by bytes).
    func user(_ uid: String, bearer: String?, profile: AppProfile) throws(APIError) -> VerifiedToken {
        guard let bearer else {
            metrics.authFailure(reason: "missing_token")
            throw .unauthorized("an 'Authorization: Bearer <token>' header is required")
        }
        let token = try verify(bearer, profile: profile)
        guard token.uid.bytesEqual(uid) else {
            metrics.authFailure(reason: "wrong_uid")
            throw .permissionDenied("the token's uid is not '\(uid.prefix(128))'")
        }
        return token
    }

    /// The read rules and the data-size limit at subscribe time: 403 `permission_denied` / `too_big`.
    func checkAccess(app: AppData, profile: AppProfile, path: DataPath, mode: SubscriptionMode, token: VerifiedToken?) throws(APIError) {
        let auth = token.map { RuleAuth(uid: $0.uid, claims: $0.claims) }
        guard profile.rules.canRead(path: path.segments, auth: auth) else {
            metrics.authFailure(reason: "rules")
            throw .permissionDenied("the app's rules do not allow reading \(path.description.prefix(256))")
        }
        guard mode.needsData else { return }
        let shadowSize = app.index.shadow(at: path).map { JSONWriter.bytes($0).count } ?? 0
        if app.oversized.contains(path) || shadowSize > profile.settings.shadowMaxBytes {
            throw .tooBig("the data at \(path.description.prefix(256)) is larger than the app's limit of \(profile.settings.shadowMaxBytes) bytes")
        }
    }

    // MARK: Quotas and ownership

    /// 400 when the path has more keys than the app allows.
    func checkPathDepth(_ path: DataPath, profile: AppProfile) throws(APIError) {
        let limit = profile.settings.quotas.maxPathKeys
        guard path.segments.count <= limit else {
            metrics.quotaRefused("path_keys")
            throw .badRequest("the path has \(path.segments.count) keys; this application allows at most \(limit)")
        }
    }

    /// Spends the write's tokens (``AppData/admitWrite(_:quotas:now:)``), the last check of a write: 429 with
    /// `Retry-After` when a bucket is empty (nothing is spent then).
    func admit(_ cost: AppData.WriteCost, app: AppData, profile: AppProfile) throws(APIError) {
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        guard let (quota, wait) = app.admitWrite(cost, quotas: profile.settings.quotas, now: now) else { return }
        metrics.quotaRefused(quota)
        let seconds = wait.isFinite ? Int(min(max(wait, 1).rounded(.up), 3600)) : 3600
        let whose =
            switch quota {
            case "client_rate": "from this client address"
            case "device_rate": "for this device"
            case "user_rate": "by this user"
            default: "for this application"
            }
        throw .quotaExceeded("too many writes \(whose); retry after \(seconds) s", retryAfterSeconds: seconds)
    }

    /// Reserves the bytes a create adds against the app's, the partition's and the replica's budgets (the
    /// caller releases them once the write is over): 429 `quota_exceeded` (app, partition), 507
    /// `insufficient_storage` (the replica's mark).
    func reserveBytes(app: AppData, profile: AppProfile, _ subscription: Subscription) throws(APIError) -> StateBudget.Reservation? {
        guard let meter = app.index.meter else { return nil }
        let bytes = app.index.bytesToSubscribe(path: subscription.path, subscriber: subscription.subscriber, settings: subscription.settings)
        switch store.budget.reserve(bytes, app: meter, appLimit: profile.settings.quotas.maxStateBytes) {
        case .success(let reservation): return reservation
        case .failure(let refusal):
            metrics.quotaRefused(refusal.quota)
            throw refusal.error
        }
    }

    /// 429 `quota_exceeded` when creating one more subscription would pass a limit of the app.
    func checkQuotas(app: AppData, profile: AppProfile, subscriber: SubscriberKey, owner: String?) throws(APIError) {
        let quotas = profile.settings.quotas
        if app.subscriptionCount >= quotas.maxSubscriptionsPerApp {
            metrics.quotaRefused("app")
            throw .quotaExceeded("this application has reached its limit of \(quotas.maxSubscriptionsPerApp) subscriptions")
        }
        if app.subscriptionCount(device: subscriber.device) >= quotas.maxSubscriptionsPerDevice {
            metrics.quotaRefused("device")
            throw .quotaExceeded("this device has reached its limit of \(quotas.maxSubscriptionsPerDevice) subscriptions")
        }
        if let owner, app.subscriptionCount(owner: owner) >= quotas.maxSubscriptionsPerUser {
            metrics.quotaRefused("user")
            throw .quotaExceeded("this user has reached its limit of \(quotas.maxSubscriptionsPerUser) subscriptions")
        }
    }

    /// A v1 subscription made with a token belongs to that token's uid: only a token of the same uid (bytes)
    /// may refresh or remove it (seed 000). An anonymous one stays open to anyone.
    func checkOwner(of existing: SubscriptionSettings?, token: VerifiedToken?) throws(APIError) {
        guard let owner = existing?.authUID else { return }
        guard let token else {
            metrics.authFailure(reason: "wrong_uid")
            throw .permissionDenied("this subscription was made with an auth token: the same user's token is required")
        }
        guard token.uid.bytesEqual(owner) else {
            metrics.authFailure(reason: "wrong_uid")
            throw .permissionDenied("this subscription belongs to another user")
        }
    }

    // MARK: v1

    func subscribe(_ request: V1SubscribeRequest) async throws(APIError) {
        let (partition, profile) = try writableApp(request.app)
        try checkPathDepth(request.path, profile: profile)
        let token = try request.authToken.map { (text) throws(APIError) in try verify(text, profile: profile) }
        let subscriber = SubscriberKey(kind: .mobile, token: request.deviceID)
        let identity = RetryKey(app: request.app, path: request.path, subscriber: subscriber)
        let expiresAt = now.addingSaturating(profile.settings.subscriptionTTLSeconds)
        var reservation: StateBudget.Reservation?
        defer { reservation?.release() }
        let needsSnapshot = try await partition.write(identity: identity) { (contents) throws(APIError) in
            let app = contents.app(request.app)
            let existing = app.index.subscription(path: request.path, subscriber: subscriber)
            try checkOwner(of: existing, token: token)
            try checkAccess(app: app, profile: profile, path: request.path, mode: request.mode, token: token)
            let settings = SubscriptionSettings(mode: request.mode, format: .v1, expiresAt: expiresAt, authUID: token?.uid)
            let subscription = Subscription(path: request.path, subscriber: subscriber, settings: settings)
            if existing == nil {
                try checkQuotas(app: app, profile: profile, subscriber: subscriber, owner: token?.uid)
                reservation = try reserveBytes(app: app, profile: profile, subscription)
            }
            try admit(
                token.map { .user(uid: $0.uid) } ?? .anonymous(client: request.clientAddress, device: subscriber.device), app: app,
                profile: profile)
            let record = SubscriptionRecord(app: request.app, subscription: subscription)
            return ([.subscription(record)], request.mode.needsData && app.index.shadow(at: request.path) == nil)
        }
        if needsSnapshot { snapshots?.requestSnapshot(app: request.app, path: request.path) }
        logger.debug("subscribed", metadata: [LoggingKeys.app: "\(request.app)", LoggingKeys.sp: "\(request.path)", LoggingKeys.mode: "\(request.mode)"])
    }

    func unsubscribe(_ request: V1UnsubscribeRequest) async throws(APIError) {
        let (partition, profile) = try writableApp(request.app)
        let token = try request.authToken.map { (text) throws(APIError) in try verify(text, profile: profile) }
        let subscriber = SubscriberKey(kind: .mobile, token: request.deviceID)
        let identity = RetryKey(app: request.app, path: request.path, subscriber: subscriber)
        try await partition.write(identity: identity) { (contents) throws(APIError) in
            let app = contents.app(request.app)
            let existing = app.index.subscription(path: request.path, subscriber: subscriber)
            try checkOwner(of: existing, token: token)
            // A DELETE of nothing writes nothing (204 all the same), but is not free to repeat: it spends from
            // the client's bucket (or the user's).
            let nothing = existing == nil
            let cost: AppData.WriteCost
            if let token {
                cost = .user(uid: token.uid)
            } else {
                cost = nothing ? .anonymousNothing(client: request.clientAddress) : .anonymous(client: request.clientAddress, device: subscriber.device)
            }
            try admit(cost, app: app, profile: profile)
            if nothing { return ([], ()) }
            return ([.subscription(.deletion(app: request.app, path: request.path, subscriber: subscriber))], ())
        }
    }

    // MARK: v2

    /// A v2 caller: the app and the uid of the call, and its bearer token, verified (once per call).
    /// An authorized v2 call: the app's partition and settings are found once, here, and every step of the call
    /// uses them. Ownership is not asked again before the partition is used: its reads and writes check it
    /// themselves, under its lock (``PartitionState/read(_:)``, ``PartitionState/write(identity:_:)``).
    struct V2Caller: Sendable {
        let app: String
        let uid: String
        let token: VerifiedToken
        let partition: PartitionState
        let profile: AppProfile
    }

    func authorize(app name: String, uid: String, bearer: String?) async throws(APIError) -> V2Caller {
        let (partition, profile) = try app(name)
        return V2Caller(app: name, uid: uid, token: try user(uid, bearer: bearer, profile: profile), partition: partition, profile: profile)
    }

    /// The caller's partition and settings for a write: 503 at once while Kafka cannot take writes.
    func writable(_ caller: V2Caller) throws(APIError) -> (PartitionState, AppProfile) {
        try checkWritable()
        return (caller.partition, caller.profile)
    }

    func create(_ caller: V2Caller, request: V2SubscriptionRequest, allowsUpdate: Bool) async throws(APIError) -> V2WriteOutcome {
        let (name, uid, token) = (caller.app, caller.uid, caller.token)
        let (partition, profile) = try writable(caller)
        try checkPathDepth(request.path, profile: profile)
        let subscriber = try subscriber(kind: request.kind, destination: request.destination, context: request.context, format: request.format, uid: uid, profile: profile)
        let identity = RetryKey(app: name, path: request.path, subscriber: subscriber)
        let now = self.now
        var reservation: StateBudget.Reservation?
        defer { reservation?.release() }
        let (outcome, needsSnapshot) = try await partition.write(identity: identity) {
            (contents) throws(APIError) -> (records: [StateRecord], value: (V2WriteOutcome, Bool)) in
            let app = contents.app(name)
            let existing = app.index.subscription(path: request.path, subscriber: subscriber)
            if request.expirationTimestampSeconds == 0 {
                let records: [StateRecord] =
                    existing == nil ? [] : [.subscription(.deletion(app: name, path: request.path, subscriber: subscriber))]
                return (records, (.deleted, false))
            }
            if existing != nil && !allowsUpdate {
                throw .conflict("this subscription exists; add ?allowsUpdate=true to update it")
            }
            // A POST replaces the whole subscription: without `encryption`, an update drops the device key.
            return try store(
                app: app, profile: profile, token: token, path: request.path, subscriber: subscriber, mode: request.mode,
                format: request.format, filters: request.filters, encryption: request.encryption,
                expiration: request.expirationTimestampSeconds, existing: existing, now: now, reservation: &reservation)
        }
        if needsSnapshot { snapshots?.requestSnapshot(app: name, path: request.path) }
        return outcome
    }

    func update(_ caller: V2Caller, id: String, request: V2PartialRequest) async throws(APIError) -> V2WriteOutcome {
        let (name, uid, token) = (caller.app, caller.uid, caller.token)
        let (partition, profile) = try writable(caller)
        // The identity: the current subscription's, or the one the body names (creating through PUT).
        let current = try await partition.read { find(app: $0.existingApp(name), uid: uid, id: id) }
        let path: DataPath
        let subscriber: SubscriberKey
        if let current {
            if let kind = request.kind, kind != current.subscriber.kind { throw immutable("kind") }
            if let requested = request.path, requested != current.path { throw immutable("path") }
            if let context = request.context, !Self.names(context, current.subscriber) { throw immutable("context") }
            if let destination = request.destination, !destination.bytesEqual(String(current.subscriber.destination)) {
                throw immutable("destination")
            }
            if current.subscriber.kind == .webhook, request.format == .v1 { throw webhookFormat }
            path = current.path
            subscriber = current.subscriber
        } else {
            guard let kind = request.kind, let requested = request.path, let context = request.context ?? (kind == .webhook ? "" : nil),
                SubscriptionID.make(app: name, uid: uid, kind: kind, destination: request.destination ?? "", path: requested, context: context)
                    .bytesEqual(id)
            else { throw .notFound("no subscription '\(id.prefix(64))' for this user") }
            try checkPathDepth(requested, profile: profile)
            path = requested
            subscriber = try self.subscriber(
                kind: kind, destination: request.destination, context: context, format: request.format ?? .v2, uid: uid, profile: profile)
        }
        let identity = RetryKey(app: name, path: path, subscriber: subscriber)
        let now = self.now
        var reservation: StateBudget.Reservation?
        defer { reservation?.release() }
        let (outcome, needsSnapshot) = try await partition.write(identity: identity) {
            (contents) throws(APIError) -> (records: [StateRecord], value: (V2WriteOutcome, Bool)) in
            let app = contents.app(name)
            let existing = app.index.subscription(path: path, subscriber: subscriber)
            if request.expirationTimestampSeconds == 0 {
                let records: [StateRecord] =
                    existing == nil ? [] : [.subscription(.deletion(app: name, path: path, subscriber: subscriber))]
                return (records, (.deleted, false))
            }
            let encryption: DeviceEncryption?
            switch request.encryption {
            case nil: encryption = existing?.encryption
            case .set(let key)?: encryption = key
            case .remove?: encryption = nil
            }
            return try store(
                app: app, profile: profile, token: token, path: path, subscriber: subscriber,
                mode: request.mode ?? existing?.mode ?? .noData, format: request.format ?? existing?.format ?? .v2,
                filters: request.filters ?? existing?.filters, encryption: encryption, expiration: request.expirationTimestampSeconds,
                existing: existing, now: now, reservation: &reservation)
        }
        if needsSnapshot { snapshots?.requestSnapshot(app: name, path: path) }
        return outcome
    }

    func list(_ caller: V2Caller) async throws(APIError) -> [V2SubscriptionDocument] {
        let (name, uid, partition) = (caller.app, caller.uid, caller.partition)
        let subscriptions = try await partition.read { $0.existingApp(name)?.index.subscriptions(ofUser: uid) ?? [] }
        return subscriptions.map { document(app: name, $0) }
    }

    func get(_ caller: V2Caller, id: String) async throws(APIError) -> V2SubscriptionDocument {
        let (name, uid, partition) = (caller.app, caller.uid, caller.partition)
        guard let subscription = try await partition.read({ find(app: $0.existingApp(name), uid: uid, id: id) }) else {
            throw .notFound("no subscription '\(id.prefix(64))' for this user")
        }
        return document(app: name, subscription)
    }

    func delete(_ caller: V2Caller, id: String) async throws(APIError) {
        let (name, uid) = (caller.app, caller.uid)
        let (partition, _) = try writable(caller)
        guard let subscription = try await partition.read({ find(app: $0.existingApp(name), uid: uid, id: id) }) else {
            throw .notFound("no subscription '\(id.prefix(64))' for this user")
        }
        let identity = RetryKey(app: name, path: subscription.path, subscriber: subscription.subscriber)
        try await partition.write(identity: identity) { (contents) throws(APIError) in
            guard contents.existingApp(name)?.index.subscription(path: subscription.path, subscriber: subscription.subscriber) != nil
            else { throw .notFound("no subscription '\(id.prefix(64))' for this user") }
            return ([.subscription(.deletion(app: name, path: subscription.path, subscriber: subscription.subscriber))], ())
        }
    }

    /// Whether a PUT's `context` names the subscriber's: the same bytes, or, for a body without `kind` (whose
    /// context is read as given), the same APNs token in other letter case.
    private static func names(_ context: String, _ subscriber: SubscriberKey) -> Bool {
        let stored = String(subscriber.context)
        if context.bytesEqual(stored) { return true }
        return subscriber.kind == .apns && context.lowercased().bytesEqual(stored)
    }

    private func immutable(_ field: String) -> APIError {
        .badRequest("'\(field)' is part of the subscription's identity (its id): create a new subscription instead")
    }

    /// The v2 subscription `id` of user `uid`. O(the user's subscriptions).
    private func find(app: AppData?, uid: String, id: String) -> Subscription? {
        guard let app else { return nil }
        return app.index.subscriptions(ofUser: uid).first {
            SubscriptionID.make(app: app.name, path: $0.path, subscriber: $0.subscriber).bytesEqual(id)
        }
    }

    func document(app: String, _ subscription: Subscription) -> V2SubscriptionDocument {
        var document = V2SubscriptionDocument(
            id: SubscriptionID.make(app: app, path: subscription.path, subscriber: subscription.subscriber),
            uid: subscription.subscriber.uid ?? "", kind: subscription.subscriber.kind, mode: subscription.settings.mode,
            path: subscription.path, context: String(subscription.subscriber.context),
            expirationTimestampSeconds: subscription.settings.expiresAt, format: subscription.settings.format,
            filters: subscription.settings.filters, encryption: subscription.settings.encryption)
        if subscription.subscriber.kind == .webhook { document.destination = String(subscription.subscriber.destination) }
        return document
    }

    private var webhookFormat: APIError { .badRequest("a webhook receives the v2 event as JSON: 'format' must be v2") }

    /// The subscriber of a v2 create: for a webhook, the destination checked against the app's settings (400
    /// when the app has no webhook secret, when its host is a refused address literal or `localhost` and the
    /// app does not allow private destinations; every address it resolves to is checked again at each delivery).
    private func subscriber(
        kind: SubscriberKind, destination: String?, context: String, format: NotificationFormat, uid: String, profile: AppProfile
    ) throws(APIError) -> SubscriberKey {
        if kind == .webpush { return try webPushSubscriber(context: context, uid: uid, profile: profile) }
        if kind == .apns, profile.settings.apns == nil {
            throw .badRequest("application '\(profile.name.prefix(128))' has no apns settings: apns subscriptions are not enabled")
        }
        guard kind == .webhook else { return SubscriberKey(kind: kind, token: context, uid: uid) }
        guard let destination else { throw .badRequest("'destination' (the https:// URL to POST to) is required for a webhook") }
        guard format == .v2 else { throw webhookFormat }
        guard profile.sender(for: .webhook) != nil, let settings = profile.settings.webhook else {
            throw .badRequest("application '\(profile.name.prefix(128))' has no webhook secret: webhook subscriptions are not enabled")
        }
        let url: WebhookURL
        do {
            url = try WebhookURL(destination)
        } catch {
            throw .badRequest("'destination': \(error.description)")
        }
        if !settings.allowPrivateDestinations, let refusal = url.refusal {
            metrics.webhookDestinationRefused()
            throw .badRequest("'destination' is \(refusal): refused (the app's settings do not allow private destinations)")
        }
        return .webhook(destination: destination, context: context, uid: uid)
    }

    /// The subscriber of a v2 `webpush` create: `context` is the browser's subscription as the API read it
    /// (``PushFormats/BrowserSubscription``); 400 when the app has no `webPush` settings, or when the endpoint's
    /// host is a refused address literal or `localhost` and the app does not allow private endpoints (every address
    /// it resolves to is checked again at each delivery).
    private func webPushSubscriber(context: String, uid: String, profile: AppProfile) throws(APIError) -> SubscriberKey {
        guard profile.sender(for: .webpush) != nil, let settings = profile.settings.webPush else {
            throw .badRequest("application '\(profile.name.prefix(128))' has no webPush settings: webpush subscriptions are not enabled")
        }
        guard let browser = BrowserSubscription(token: context), let url = try? WebhookURL(browser.endpoint) else {
            throw .badRequest("'context' must be the browser's subscription: {\"endpoint\":…,\"keys\":{\"p256dh\":…,\"auth\":…}}")
        }
        if !settings.allowPrivateEndpoints, let refusal = url.refusal {
            metrics.webhookDestinationRefused()
            throw .badRequest("'context.endpoint' is \(refusal): refused (the app's settings do not allow private endpoints)")
        }
        return SubscriberKey(kind: .webpush, token: context, uid: uid)
    }

    /// Under the partition's lock: checks access and quotas, computes the expiry (the requested one, capped by
    /// the app's lifetime), returns the record to write and what to answer.
    private func store(
        app: AppData, profile: AppProfile, token: VerifiedToken, path: DataPath, subscriber: SubscriberKey,
        mode: SubscriptionMode, format: NotificationFormat, filters: SubscriptionFilters?, encryption: DeviceEncryption?,
        expiration: Int64?, existing: SubscriptionSettings?, now: Int64, reservation: inout StateBudget.Reservation?
    ) throws(APIError) -> (records: [StateRecord], value: (V2WriteOutcome, Bool)) {
        let existed = existing != nil
        do {
            try filters?.check(mode: mode)
        } catch {
            throw .badRequest(error.description)
        }
        if encryption != nil, format != .v2 { throw .badRequest("'encryption' needs format v2 (v1 payloads are never encrypted)") }
        if encryption != nil, subscriber.kind == .webhook {
            throw .badRequest("'encryption' is for device subscriptions: a webhook receives the v2 event as JSON over HTTPS")
        }
        if encryption != nil, subscriber.kind == .webpush {
            throw .badRequest("'encryption' is not for webpush: every Web Push message is encrypted for the browser's own keys (RFC 8291)")
        }
        try checkAccess(app: app, profile: profile, path: path, mode: mode, token: token)
        let latest = now.addingSaturating(profile.settings.subscriptionTTLSeconds)
        if let expiration, expiration <= now {
            throw .badRequest("'expirationTimestampSeconds' is in the past (use 0 to delete the subscription)")
        }
        let settings = SubscriptionSettings(
            mode: mode, format: format, expiresAt: min(expiration ?? latest, latest), authUID: token.uid, filters: filters,
            encryption: encryption)
        let subscription = Subscription(path: path, subscriber: subscriber, settings: settings)
        if !existed {
            try checkQuotas(app: app, profile: profile, subscriber: subscriber, owner: token.uid)
        }
        // A refresh reserves only what a larger device key adds (nothing most often).
        if !existed || app.index.bytesToSubscribe(path: path, subscriber: subscriber, settings: settings) > 0 {
            reservation = try reserveBytes(app: app, profile: profile, subscription)
        }
        let document = document(app: app.name, subscription)
        let needsSnapshot = mode.needsData && app.index.shadow(at: path) == nil
        return ([.subscription(SubscriptionRecord(app: app.name, subscription: subscription))], (existed ? .updated(document) : .created(document), needsSnapshot))
    }
}
