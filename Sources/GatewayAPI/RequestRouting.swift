import PushCore

/// How an API call for an app reaches the replica that owns the app's partition (SPEC §3: any replica
/// accepts any call and answers with the owner's answer).
public protocol RequestRouting: Sendable {
    /// Where calls for `app` go now, waiting (at most the router's bound) while its partition has no ready
    /// owner. `forwarded`: the call was already forwarded once, so it must be answered here or refused.
    func route(app: String, forwarded: Bool) async -> RouteDecision
    /// Sends the call to the replica at `address` (e.g. `http://10.0.0.5:8080`); nil when it could not be
    /// reached.
    func forward(_ request: ForwardedRequest, to address: String) async -> ForwardedResponse?
}

public enum RouteDecision: Sendable, Equatable {
    /// This replica owns the partition and has loaded it.
    case local
    /// Another replica does.
    case remote(address: String)
    /// Nobody can answer within the bound (a rebalance, a partition still loading).
    case unavailable(reason: String)
}

/// A call as it is forwarded: method, path with query, the headers that matter, body.
public struct ForwardedRequest: Sendable {
    public var method: String
    public var pathAndQuery: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(method: String, pathAndQuery: String, headers: [(name: String, value: String)], body: [UInt8]) {
        self.method = method
        self.pathAndQuery = pathAndQuery
        self.headers = headers
        self.body = body
    }
}

/// The owner's answer, passed on unchanged.
public struct ForwardedResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
