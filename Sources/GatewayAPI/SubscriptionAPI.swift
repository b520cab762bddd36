import PushCore
import PushFormats

/// A v1 subscribe request (`PUT /base/{app}/.wakeup/{path}?id=&mode=&token=`).
public struct V1SubscribeRequest: Sendable, Equatable {
    public var app: String
    public var path: DataPath
    public var deviceID: String
    public var mode: SubscriptionMode
    public var authToken: String?
    /// The client's address (``ClientAddress``): anonymous writes are rate-limited per client.
    public var clientAddress: String

    public init(
        app: String, path: DataPath, deviceID: String, mode: SubscriptionMode, authToken: String?, clientAddress: String = ""
    ) {
        self.app = app
        self.path = path
        self.deviceID = deviceID
        self.mode = mode
        self.authToken = authToken
        self.clientAddress = clientAddress
    }
}

/// A v1 unsubscribe request (`DELETE /base/{app}/.wakeup/{path}?id=&token=`).
public struct V1UnsubscribeRequest: Sendable, Equatable {
    public var app: String
    public var path: DataPath
    public var deviceID: String
    public var authToken: String?
    /// The client's address (``ClientAddress``).
    public var clientAddress: String

    public init(app: String, path: DataPath, deviceID: String, authToken: String?, clientAddress: String = "") {
        self.app = app
        self.path = path
        self.deviceID = deviceID
        self.authToken = authToken
        self.clientAddress = clientAddress
    }
}

/// What the REST API needs from the gateway. Implementations throw ``APIError``.
public protocol SubscriptionAPI: Sendable {
    func subscribe(_ request: V1SubscribeRequest) async throws(APIError)
    func unsubscribe(_ request: V1UnsubscribeRequest) async throws(APIError)
}

/// Liveness, readiness and metrics for operators.
public protocol OperationsProbe: Sendable {
    /// Nil when ready, else why not.
    func notReadyReason() -> String?
    /// Prometheus text exposition.
    func metricsText() -> String
}

/// The body of a v2 subscribe or update request (seed 001), validated.
public struct V2SubscriptionRequest: Sendable, Equatable {
    public var kind: SubscriberKind
    public var mode: SubscriptionMode
    public var path: DataPath
    /// The push token (FCM registration token, HMS token); a webhook's free text, echoed in each delivery.
    public var context: String
    /// Nil: the app's default lifetime. 0: delete the subscription.
    public var expirationTimestampSeconds: Int64?
    public var format: NotificationFormat
    /// Nil or empty: every write wakes the device.
    public var filters: SubscriptionFilters?
    /// The device's own public key (checked): its notifications are encrypted for it alone. v2 format only.
    public var encryption: DeviceEncryption?
    /// `webhook` only: the `https://` URL deliveries are POSTed to (syntax checked; addresses by the service).
    public var destination: String? = nil

    public init(
        kind: SubscriberKind, mode: SubscriptionMode, path: DataPath, context: String, expirationTimestampSeconds: Int64?,
        format: NotificationFormat, filters: SubscriptionFilters? = nil, encryption: DeviceEncryption? = nil
    ) {
        self.kind = kind
        self.mode = mode
        self.path = path
        self.context = context
        self.expirationTimestampSeconds = expirationTimestampSeconds
        self.format = format
        self.filters = filters
        self.encryption = encryption
    }
}

/// A v2 subscription document, as the API returns it.
public struct V2SubscriptionDocument: Sendable, Equatable {
    public var id: String
    public var uid: String
    public var kind: SubscriberKind
    public var mode: SubscriptionMode
    public var path: DataPath
    public var context: String
    public var expirationTimestampSeconds: Int64
    public var format: NotificationFormat
    public var filters: SubscriptionFilters?
    /// The device's public key, when the subscription has one.
    public var encryption: DeviceEncryption?
    /// `webhook` only: the URL deliveries are POSTed to.
    public var destination: String? = nil

    public init(
        id: String, uid: String, kind: SubscriberKind, mode: SubscriptionMode, path: DataPath, context: String,
        expirationTimestampSeconds: Int64, format: NotificationFormat, filters: SubscriptionFilters? = nil, encryption: DeviceEncryption? = nil
    ) {
        self.encryption = encryption
        self.id = id
        self.uid = uid
        self.kind = kind
        self.mode = mode
        self.path = path
        self.context = context
        self.expirationTimestampSeconds = expirationTimestampSeconds
        self.format = format
        self.filters = filters
    }

    /// The `context` as the API shows it: the push token or a webhook's text, or a browser's subscription as the
    /// object it was given as (``PushFormats/BrowserSubscription``).
    private var contextJSON: JSONValue {
        guard kind == .webpush, let subscription = BrowserSubscription(token: context) else { return .string(context) }
        return subscription.json
    }

    /// `filters` only when the subscription has some.
    public var json: JSONValue {
        var members: [ExactString: JSONValue] = [
            "id": .string(id), "uid": .string(uid), "kind": .string(kind.rawValue), "mode": .string(mode.rawValue),
            "path": .string(path.description), "context": contextJSON,
            "expirationTimestampSeconds": .number(String(expirationTimestampSeconds)), "format": .string(format.rawValue),
        ]
        if let filters { members["filters"] = filters.json }
        if let encryption { members["encryption"] = encryption.json }
        if let destination { members["destination"] = .string(destination) }
        return .object(members)
    }
}

/// What a v2 create/update did.
public enum V2WriteOutcome: Sendable, Equatable {
    case created(V2SubscriptionDocument)
    case updated(V2SubscriptionDocument)
    /// `expirationTimestampSeconds: 0`.
    case deleted
}

/// The v2 subscriptions API (seed 001). A call is authorized once (``authorize(app:uid:bearer:)``, with the
/// `Authorization: Bearer` token, nil when absent); what it returns is passed to the operation.
public protocol V2SubscriptionAPI: Sendable {
    /// A caller whose app and bearer token were checked: the token is verified once per call.
    associatedtype Caller: Sendable
    /// Checks the app and the bearer token before the body is read (401/403/404 come before 400).
    func authorize(app: String, uid: String, bearer: String?) async throws(APIError) -> Caller
    func create(_ caller: Caller, request: V2SubscriptionRequest, allowsUpdate: Bool) async throws(APIError) -> V2WriteOutcome
    /// `request` fields other than mode, format and expiry must match the subscription `id` names.
    func update(_ caller: Caller, id: String, request: V2PartialRequest) async throws(APIError) -> V2WriteOutcome
    func list(_ caller: Caller) async throws(APIError) -> [V2SubscriptionDocument]
    func get(_ caller: Caller, id: String) async throws(APIError) -> V2SubscriptionDocument
    func delete(_ caller: Caller, id: String) async throws(APIError)
    /// Moves every subscription of the caller on one push token to another, in one decision (``V2ReplaceContextRequest``).
    func replaceContext(_ caller: Caller, request: V2ReplaceContextRequest) async throws(APIError) -> V2ReplaceContextOutcome
}

/// What a v2 `PUT` does to the device key: absent keeps it.
public enum EncryptionUpdate: Sendable, Equatable {
    /// `"encryption": {…}`: this key from now on.
    case set(DeviceEncryption)
    /// `"encryption": null`: no device key any more (the app's key, or none, applies again).
    case remove
}

/// The body of a v2 `PUT .../{uid}/{id}`: every field optional; absent ones keep the subscription's values.
public struct V2PartialRequest: Sendable, Equatable {
    public var kind: SubscriberKind?
    public var mode: SubscriptionMode?
    public var path: DataPath?
    public var context: String?
    public var expirationTimestampSeconds: Int64?
    public var format: NotificationFormat?
    /// Nil: keep the subscription's filters. Empty (`"filters": {}`): remove them.
    public var filters: SubscriptionFilters?
    /// Nil: keep the device key (or its absence).
    public var encryption: EncryptionUpdate?
    /// `webhook` only: the URL deliveries are POSTed to (part of the identity).
    public var destination: String? = nil

    public init(
        kind: SubscriberKind? = nil, mode: SubscriptionMode? = nil, path: DataPath? = nil, context: String? = nil,
        expirationTimestampSeconds: Int64? = nil, format: NotificationFormat? = nil, filters: SubscriptionFilters? = nil, encryption: EncryptionUpdate? = nil
    ) {
        self.encryption = encryption
        self.kind = kind
        self.mode = mode
        self.path = path
        self.context = context
        self.expirationTimestampSeconds = expirationTimestampSeconds
        self.format = format
        self.filters = filters
    }
}
