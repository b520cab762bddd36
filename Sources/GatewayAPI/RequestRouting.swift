import PushCore

/// How an API call for an app reaches the replica that owns the app's partition (SPEC §3: any replica
/// accepts any call and answers with the owner's answer).
public protocol RequestRouting: Sendable {
    /// The bound of a whole call: waiting for an owner, forwarding, and the owner's answer (`http.ownerWaitMs`).
    var ownerWait: Duration { get }
    /// Whether `app` is an app this gateway serves (configured and enabled). Calls for other apps are answered
    /// by the replica that received them (404 or 403), never forwarded.
    func serves(app: String) -> Bool
    /// Where calls for `app` go now, waiting (until `deadline`) while its partition has no ready owner.
    /// `forwarded`: the call was already forwarded once, so it must be answered here or refused, at once.
    func route(app: String, forwarded: Bool, deadline: ContinuousClock.Instant) async -> RouteDecision
    /// Sends the call to the replica at `address` (a member address checked when its record was read), signed
    /// for the hop, answering by `deadline`.
    func forward(_ request: ForwardedRequest, to address: String, deadline: ContinuousClock.Instant) async -> ForwardOutcome
    /// Checks the hop authentication of a call that says it was forwarded by a replica.
    func authenticate(forwarded request: ForwardedRequest) -> HopVerdict
}

public enum RouteDecision: Sendable, Equatable {
    /// This replica owns the partition and has loaded it.
    case local
    /// Another replica does.
    case remote(address: String)
    /// Nobody can answer within the bound (a rebalance, a partition still loading).
    case unavailable(reason: String)
}

/// What became of one forwarding attempt.
public enum ForwardOutcome: Sendable {
    /// The owner answered (any status).
    case answered(ForwardedResponse)
    /// The call may be sent again, to the owner the view names next: it certainly did not reach the owner
    /// (connection refused before a byte was written, no such host), or it is a read whose connection failed.
    case mayBeSentAgain(reason: String)
    /// The call may have reached the owner but no answer came (a timeout, a reset connection): whether it took
    /// effect is unknown, so a write is never sent again.
    case unknown(reason: String)
}

/// The hop check of a call forwarded by another replica.
public enum HopVerdict: Sendable, Equatable {
    /// Signed with the cluster secret: `client` is the original client's address, as the forwarding replica saw it.
    case authentic(client: String)
    /// Not signed, badly signed, stale or replayed.
    case rejected(reason: String)
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

    /// The value of the first header named `name` (lowercase), if any.
    public func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name }?.value }
}

/// The owner's answer, passed on.
public struct ForwardedResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name }?.value }
}
