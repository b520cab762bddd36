import PushCore

/// A v1 subscribe request (`PUT /base/{app}/.wakeup/{path}?id=&mode=&token=`).
public struct V1SubscribeRequest: Sendable, Equatable {
    public var app: String
    public var path: DataPath
    public var deviceID: String
    public var mode: SubscriptionMode
    public var authToken: String?

    public init(app: String, path: DataPath, deviceID: String, mode: SubscriptionMode, authToken: String?) {
        self.app = app
        self.path = path
        self.deviceID = deviceID
        self.mode = mode
        self.authToken = authToken
    }
}

/// A v1 unsubscribe request (`DELETE /base/{app}/.wakeup/{path}?id=&token=`).
public struct V1UnsubscribeRequest: Sendable, Equatable {
    public var app: String
    public var path: DataPath
    public var deviceID: String
    public var authToken: String?

    public init(app: String, path: DataPath, deviceID: String, authToken: String?) {
        self.app = app
        self.path = path
        self.deviceID = deviceID
        self.authToken = authToken
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
