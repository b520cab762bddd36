import Foundation
import GatewayAPI
import PushCore
import SSLCrypto

/// The operators' per-app status (``AdminAPI``): settings in force and the last refused file, provider health
/// per project, pauses, the delivery backlog, the event hook's queue and the subscriptions. An app's details come from the replica that
/// owns its partition (the call is forwarded there like any app call).
struct AdminService: AdminAPI {
    /// The admin bearer token; nil: the admin endpoints are disabled.
    let token: String?
    let profiles: AppProfiles
    let store: StateStore
    let delivery: DeliveryService
    /// Nil in tests without one.
    var eventHook: EventHookService? = nil
    let membership: Membership
    let board: AppStatusBoard

    func authorizeAdmin(bearer: String?) throws(APIError) {
        // Disabled first: a 401 would ask for a token that can never work.
        guard let token, !token.isEmpty else {
            throw APIError(.forbidden, "disabled", "the admin API is disabled: set admin.tokenFile (or admin.token) in the configuration")
        }
        guard let bearer else { throw .unauthorized("an 'Authorization: Bearer <admin token>' header is required") }
        guard constantTimeEquals(Array(bearer.utf8), Array(token.utf8)) else {
            throw APIError(.forbidden, "permission_denied", "not the admin token")
        }
    }

    func apps() async throws(APIError) -> JSONValue {
        var apps: [JSONValue] = []
        for name in profiles.names {
            let partition = store.partitionIndex(ofApp: name)
            var document: [ExactString: JSONValue] = [
                "app": .string(name), "partition": .number(String(partition)),
                "enabled": .bool(profiles.profile(name)?.enabled ?? false),
            ]
            switch membership.route(partition: partition) {
            case .local(let ready): document["servedBy"] = .string(ready ? "this replica" : "this replica (loading)")
            case .remote(let address, _): document["servedBy"] = .string(address)
            case .unknown: document["servedBy"] = .null
            }
            let (settings, _) = board.json(app: name)
            document["settings"] = settings
            apps.append(.object(document))
        }
        return .object(["apps": .array(apps)])
    }

    func app(_ name: String) async throws(APIError) -> JSONValue {
        guard let profile = profiles.profile(name) else { throw .namespaceDoesNotExist(name) }
        guard let partition = store.servingPartition(ofApp: name) else {
            throw .notOwner("the application's partition is not served here right now; retry")
        }
        let now = Date().timeIntervalSince1970
        let subscriptions = try await partition.read { $0.existingApp(name)?.index.subscriptionCount ?? 0 }
        let (queued, retrying, pausedUntil) = delivery.status(app: name, now: now)
        let (settings, providers) = board.json(app: name)
        let pacing = delivery.pacing(app: name).map { project, pace, waiting -> JSONValue in
            .object([
                "project": .string(project), "sendsPerSecond": .number(String(format: "%.3f", pace.rate)),
                "burst": .number(String(pace.burst)), "waiting": .number(String(waiting)), "pacing": .bool(waiting > 0),
            ])
        }
        var document: [ExactString: JSONValue] = [
            "app": .string(name), "enabled": .bool(profile.enabled), "partition": .number(String(partition.partition)),
            "settings": settings, "providers": providers, "subscriptions": .number(String(subscriptions)),
            "deliveries": .object([
                "queued": .number(String(queued)), "retryBacklog": .number(String(retrying)),
                "pausedUntil": pausedUntil.map(AppStatusBoard.time) ?? .null,
                "pacing": .array(pacing),
            ]),
        ]
        document["eventHook"] =
            profile.settings.eventHook == nil ? .null : .object(["queued": .number(String(eventHook?.queued(app: name) ?? 0))])
        if let webPush = profile.sender(for: .webpush) as? WebPushSender {
            // What the app's pages subscribe with (`applicationServerKey`), and the contact push services see.
            document["webPush"] = .object([
                "applicationServerKey": .string(webPush.client.vapid.publicKey), "subject": .string(webPush.client.vapid.subject),
            ])
        }
        document["servedBy"] = .string(membership.address)
        return .object(document)
    }
}
