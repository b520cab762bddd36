import Auth
import Foundation
import GatewayAPI
import Logging
import PushCore
import Rules

/// The REST API's operations (v1 and v2). A change is written to the state topic and answered once this
/// replica has applied it (``StateLog``): durable and live. Every replica follows the whole state topic, so
/// any replica answers reads and writes for any app (a write through another replica is visible here within
/// about 50 ms).
struct SubscriptionService: SubscriptionAPI, V2SubscriptionAPI {
    let store: SubscriptionStore
    let writer: any SubscriptionWriter
    let snapshots: (any SnapshotRequester)?
    let metrics: GatewayMetrics
    let logger: Logger

    private var now: Int64 { Int64(Date().timeIntervalSince1970) }

    func app(_ name: String) throws(APIError) -> (AppState, AppProfile) {
        guard let app = store.app(name), let profile = app.profile else { throw .namespaceDoesNotExist(name) }
        guard profile.enabled else { throw .disabled(name) }
        return (app, profile)
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

    /// v2: a bearer token whose uid is the path's uid.
    func user(_ uid: String, bearer: String?, profile: AppProfile) throws(APIError) -> VerifiedToken {
        guard let bearer else {
            metrics.authFailure(reason: "missing_token")
            throw .unauthorized("an 'Authorization: Bearer <token>' header is required")
        }
        let token = try verify(bearer, profile: profile)
        guard token.uid == uid else {
            metrics.authFailure(reason: "wrong_uid")
            throw .permissionDenied("the token's uid is not '\(uid.prefix(128))'")
        }
        return token
    }

    /// The read rules and the data-size limit at subscribe time: 403 `permission_denied` / `too_big`.
    func checkAccess(app: AppState, profile: AppProfile, path: DataPath, mode: SubscriptionMode, token: VerifiedToken?) throws(APIError) {
        let auth = token.map { RuleAuth(uid: $0.uid, claims: $0.claims) }
        guard profile.rules.canRead(path: path.segments, auth: auth) else {
            metrics.authFailure(reason: "rules")
            throw .permissionDenied("the app's rules do not allow reading \(path.description.prefix(256))")
        }
        guard mode.needsData else { return }
        let shadowSize = app.withIndex { $0.shadow(at: path) }.map { JSONWriter.bytes($0).count } ?? 0
        if app.isOversized(path) || shadowSize > profile.settings.shadowMaxBytes {
            throw .tooBig("the data at \(path.description.prefix(256)) is larger than the app's limit of \(profile.settings.shadowMaxBytes) bytes")
        }
    }

    // MARK: v1

    func subscribe(_ request: V1SubscribeRequest) async throws(APIError) {
        let (app, profile) = try app(request.app)
        let token = try request.authToken.map { (text) throws(APIError) in try verify(text, profile: profile) }
        try checkAccess(app: app, profile: profile, path: request.path, mode: request.mode, token: token)
        let settings = SubscriptionSettings(
            mode: request.mode, format: .v1, expiresAt: now + profile.settings.subscriptionTTLSeconds, authUID: token?.uid)
        let subscription = Subscription(
            path: request.path, subscriber: SubscriberKey(kind: .mobile, token: request.deviceID), settings: settings)
        try await write(SubscriptionRecord(app: app.name, subscription: subscription))
        requestSnapshotIfNeeded(app: app, path: request.path, mode: request.mode)
        logger.debug("subscribed", metadata: ["app": "\(request.app)", "sp": "\(request.path)", "mode": "\(request.mode)"])
    }

    func unsubscribe(_ request: V1UnsubscribeRequest) async throws(APIError) {
        let (app, profile) = try app(request.app)
        if let text = request.authToken { _ = try verify(text, profile: profile) }
        try await write(
            .deletion(app: app.name, path: request.path, subscriber: SubscriberKey(kind: .mobile, token: request.deviceID)))
    }

    // MARK: v2

    func authorize(app name: String, uid: String, bearer: String?) async throws(APIError) {
        let (_, profile) = try app(name)
        _ = try user(uid, bearer: bearer, profile: profile)
    }

    func create(app name: String, uid: String, bearer: String?, request: V2SubscriptionRequest, allowsUpdate: Bool) async throws(APIError)
        -> V2WriteOutcome
    {
        let (app, profile) = try app(name)
        let token = try user(uid, bearer: bearer, profile: profile)
        let subscriber = SubscriberKey(kind: request.kind, token: request.context, uid: uid)
        let existing = app.withIndex { $0.subscription(path: request.path, subscriber: subscriber) }
        if request.expirationTimestampSeconds == 0 {
            if existing != nil { try await write(.deletion(app: name, path: request.path, subscriber: subscriber)) }
            return .deleted
        }
        if existing != nil && !allowsUpdate {
            throw .conflict("this subscription exists; add ?allowsUpdate=true to update it")
        }
        return try await store(
            app: app, profile: profile, token: token, path: request.path, subscriber: subscriber, mode: request.mode,
            format: request.format, expiration: request.expirationTimestampSeconds, existed: existing != nil)
    }

    func update(app name: String, uid: String, id: String, bearer: String?, request: V2PartialRequest) async throws(APIError)
        -> V2WriteOutcome
    {
        let (app, profile) = try app(name)
        let token = try user(uid, bearer: bearer, profile: profile)
        let current = find(app: app, uid: uid, id: id)
        let path: DataPath
        let subscriber: SubscriberKey
        if let current {
            if let kind = request.kind, kind != current.subscriber.kind { throw immutable("kind") }
            if let requested = request.path, requested != current.path { throw immutable("path") }
            if let context = request.context, context != current.subscriber.token { throw immutable("context") }
            path = current.path
            subscriber = current.subscriber
        } else {
            // Creating through PUT: the body must name the whole tuple, and the tuple must give this id.
            guard let kind = request.kind, let requested = request.path, let context = request.context,
                SubscriptionID.make(app: name, uid: uid, kind: kind, path: requested, context: context) == id
            else { throw .notFound("no subscription '\(id.prefix(64))' for this user") }
            path = requested
            subscriber = SubscriberKey(kind: kind, token: context, uid: uid)
        }
        if request.expirationTimestampSeconds == 0 {
            if current != nil { try await write(.deletion(app: name, path: path, subscriber: subscriber)) }
            return .deleted
        }
        return try await store(
            app: app, profile: profile, token: token, path: path, subscriber: subscriber,
            mode: request.mode ?? current?.settings.mode ?? .noData, format: request.format ?? current?.settings.format ?? .v2,
            expiration: request.expirationTimestampSeconds, existed: current != nil)
    }

    func list(app name: String, uid: String, bearer: String?) async throws(APIError) -> [V2SubscriptionDocument] {
        let (app, profile) = try app(name)
        _ = try user(uid, bearer: bearer, profile: profile)
        return app.withIndex { $0.subscriptions(ofUser: uid) }.map { document(app: name, $0) }
    }

    func get(app name: String, uid: String, id: String, bearer: String?) async throws(APIError) -> V2SubscriptionDocument {
        let (app, profile) = try app(name)
        _ = try user(uid, bearer: bearer, profile: profile)
        guard let subscription = find(app: app, uid: uid, id: id) else {
            throw .notFound("no subscription '\(id.prefix(64))' for this user")
        }
        return document(app: name, subscription)
    }

    func delete(app name: String, uid: String, id: String, bearer: String?) async throws(APIError) {
        let (app, profile) = try app(name)
        _ = try user(uid, bearer: bearer, profile: profile)
        guard let subscription = find(app: app, uid: uid, id: id) else {
            throw .notFound("no subscription '\(id.prefix(64))' for this user")
        }
        try await write(.deletion(app: name, path: subscription.path, subscriber: subscription.subscriber))
    }

    private func immutable(_ field: String) -> APIError {
        .badRequest("'\(field)' is part of the subscription's identity (its id): create a new subscription instead")
    }

    private func find(app: AppState, uid: String, id: String) -> Subscription? {
        app.withIndex { $0.subscriptions(ofUser: uid) }.first {
            SubscriptionID.make(app: app.name, path: $0.path, subscriber: $0.subscriber) == id
        }
    }

    private func document(app: String, _ subscription: Subscription) -> V2SubscriptionDocument {
        V2SubscriptionDocument(
            id: SubscriptionID.make(app: app, path: subscription.path, subscriber: subscription.subscriber),
            uid: subscription.subscriber.uid ?? "", kind: subscription.subscriber.kind, mode: subscription.settings.mode,
            path: subscription.path, context: subscription.subscriber.token,
            expirationTimestampSeconds: subscription.settings.expiresAt, format: subscription.settings.format)
    }

    /// Checks access, computes the expiry (the requested one, capped by the app's lifetime), and stores.
    private func store(
        app: AppState, profile: AppProfile, token: VerifiedToken, path: DataPath, subscriber: SubscriberKey,
        mode: SubscriptionMode, format: NotificationFormat, expiration: Int64?, existed: Bool
    ) async throws(APIError) -> V2WriteOutcome {
        try checkAccess(app: app, profile: profile, path: path, mode: mode, token: token)
        let now = self.now
        let latest = now + profile.settings.subscriptionTTLSeconds
        if let expiration, expiration <= now {
            throw .badRequest("'expirationTimestampSeconds' is in the past (use 0 to delete the subscription)")
        }
        let settings = SubscriptionSettings(
            mode: mode, format: format, expiresAt: min(expiration ?? latest, latest), authUID: token.uid)
        let subscription = Subscription(path: path, subscriber: subscriber, settings: settings)
        try await write(SubscriptionRecord(app: app.name, subscription: subscription))
        requestSnapshotIfNeeded(app: app, path: path, mode: mode)
        let document = document(app: app.name, subscription)
        return existed ? .updated(document) : .created(document)
    }

    // MARK: Storage

    private func requestSnapshotIfNeeded(app: AppState, path: DataPath, mode: SubscriptionMode) {
        guard mode.needsData, let snapshots, app.withIndex({ $0.shadow(at: path) }) == nil else { return }
        snapshots.requestSnapshot(app: app.name, path: path)
    }

    private func write(_ record: SubscriptionRecord) async throws(APIError) {
        do {
            try await writer.write([.subscription(record)])
        } catch {
            logger.error("subscription not stored", metadata: ["app": "\(record.app)", "error": "\(error)"])
            throw .unavailable("the subscription could not be stored; retry later")
        }
    }
}

struct Probe: OperationsProbe {
    let readiness: Readiness
    let stateLog: StateLog?
    let metrics: GatewayMetrics
    let store: SubscriptionStore

    func notReadyReason() -> String? {
        if let stateLog, !stateLog.isLoaded { return "loading subscriptions from the state topic" }
        return readiness.notReadyReason
    }

    /// Gauges are computed at scrape time from the store (no bookkeeping on the hot path).
    func metricsText() -> String {
        let counts = store.counts()
        metrics.recordProbe(ready: notReadyReason() == nil, stateLoaded: stateLog?.isLoaded ?? true)
        metrics.subscriptions.set(Double(counts.subscriptions))
        metrics.shadows.set(Double(counts.shadowsKept))
        return metrics.text()
    }
}
