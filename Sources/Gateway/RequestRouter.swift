import CurlHTTP
import GatewayAPI
import GatewayLogging
import Logging
import PushCore

/// Finds the replica that answers an app's calls (``Membership``) and forwards calls to it over HTTP/1.1
/// (keep-alive connections between replicas), signed with the cluster secret (``ClusterKey``). While the app's
/// partition has no ready owner (a rebalance, a load), it waits for the view to change, until the call's
/// deadline; the API then answers 503 with `Retry-After`. Without a cluster secret nothing is forwarded (a
/// lone replica owns every partition).
struct RequestRouter: RequestRouting {
    let store: StateStore
    let membership: Membership
    let profiles: AppProfiles
    let client: HTTPClient
    let key: ClusterKey?
    let ownerWait: Duration
    let forwardTimeout: Duration
    let metrics: GatewayMetrics?
    let logger: Logger
    /// While Kafka cannot be reached no owner can appear (the group cannot rebalance): no waiting then.
    var kafka: KafkaHealth? = nil

    func serves(app: String) -> Bool { profiles.profile(app)?.enabled ?? false }

    func route(app: String, forwarded: Bool, deadline: ContinuousClock.Instant) async -> RouteDecision {
        while true {
            let partition = store.partitionIndex(ofApp: app)
            if partition >= 0, store.overBudget(partition) != nil {
                return .unavailable(
                    reason: "the application's partition does not fit this replica's memory budget; the operator must add replicas or memory")
            }
            if partition >= 0 {
                switch membership.route(partition: partition) {
                case .local(ready: true) where store.servingPartition(ofApp: app) != nil:
                    return .local
                case .remote(let address, ready: true) where !forwarded:
                    guard key != nil else {
                        return .unavailable(reason: "another replica owns the application's partition and no cluster secret is configured to reach it")
                    }
                    return .remote(address: address)
                default:
                    // A forwarded call is answered by its owner or refused, never forwarded again, never waits.
                    if forwarded { return .unavailable(reason: "this replica does not own the application's partition") }
                }
            }
            if partition >= 0, let reason = kafka?.notWritableReason {
                return .unavailable(reason: "no replica serves the application's partition right now: \(reason); retry")
            }
            if membership.isShuttingDown {
                return .unavailable(reason: "this replica is stopping and no owner of the application's partition is known to it; retry")
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else {
                return .unavailable(reason: "no replica serves the application's partition right now (rebalance); retry")
            }
            if partition < 0 {
                guard await store.waitForPartitionCount() > 0 else {
                    return .unavailable(reason: "the gateway is stopping before its start was over")
                }
            } else {
                await membership.waitForChange(timeout: min(left, .milliseconds(250)))
            }
        }
    }

    func forward(_ request: ForwardedRequest, to address: String, deadline: ContinuousClock.Instant) async -> ForwardOutcome {
        guard let key else { return .mayBeSentAgain(reason: "no cluster secret") }
        let left = deadline - ContinuousClock.now
        guard left > .milliseconds(1) else { return .mayBeSentAgain(reason: "the call's deadline passed") }
        var headers = request.headers
        headers.append((ClusterKey.hopHeader, key.signHop(request)))
        // While this replica stops, a call may not hold the shutdown long (an owner that hangs gets 2 s).
        let timeout = membership.isShuttingDown ? min(left, forwardTimeout, .seconds(2)) : min(left, forwardTimeout)
        var call = HTTPRequest(
            method: HTTPMethod(rawValue: request.method), url: address + request.pathAndQuery, headers: headers,
            body: request.body, timeout: timeout)
        call.http1 = true
        call.pathAsIs = true
        // A write goes out once: whether to send it again is decided here, from what the failure proves.
        call.sendOnce = !Self.isRead(request)
        do {
            let response = try await client.send(call)
            return .answered(ForwardedResponse(status: response.status, headers: response.headers, body: response.body))
        } catch {
            logger.warning("forwarding to the owner failed", metadata: [LoggingKeys.owner: "\(address)", LoggingKeys.error: "\(error)"])
            guard let failure = error as? HTTPClientError, Self.maySendAgain(request, after: failure) else {
                return .unknown(reason: "\(error)")
            }
            // The owner is gone (killed, say) but still in the view until the group reassigns its partitions: the
            // caller asks again, so wait for the view to change first (within the deadline).
            await membership.waitForChange(timeout: min(deadline - ContinuousClock.now, ownerWait / 4))
            return .mayBeSentAgain(reason: "\(failure)")
        }
    }

    /// Whether a call that failed with `failure` may be sent again (to the owner the view names next): it certainly
    /// never reached the owner (refused before a byte of it was written, or never given to the client), the owner
    /// certainly never read it (the connection was reset under the request, with no answer: a replica that stops
    /// closes a connection whose request it has not read yet; a write is sent once, so no resend of libcurl's
    /// own hides which attempt that was), or it is a read (`GET`, `HEAD`: no effect to repeat) whose connection
    /// failed without timing out. A read that timed out used its share of the deadline already; a write that may
    /// have reached the owner is never sent again.
    static func maySendAgain(_ request: ForwardedRequest, after failure: HTTPClientError) -> Bool {
        if failure.wasNeverActedOn || failure.code == .overloaded { return true }
        return isRead(request) && failure.code == .transport && !failure.isTimeout
    }

    /// `GET` and `HEAD`: calls with no effect to repeat.
    static func isRead(_ request: ForwardedRequest) -> Bool { request.method == "GET" || request.method == "HEAD" }

    func authenticate(forwarded request: ForwardedRequest) -> HopVerdict {
        guard let key else {
            metrics?.clusterMessageRefused("hop", reason: "no_cluster_secret")
            return .rejected(reason: "no cluster secret is configured here")
        }
        let verdict = key.verifyHop(request)
        if case .rejected(let reason) = verdict {
            metrics?.clusterMessageRefused("hop", reason: reason)
            logger.debug("forwarded call refused", metadata: [LoggingKeys.reason: "\(reason)"])
        }
        return verdict
    }
}
