import CurlHTTP
import GatewayAPI
import Logging
import PushCore

/// Finds the replica that answers an app's calls (``Membership``) and forwards calls to it over HTTP/1.1
/// (keep-alive connections between replicas). While the app's partition has no ready owner (a rebalance, a
/// load), it waits for the view to change, at most `waitBound`; the API then answers 503 with `Retry-After`.
struct RequestRouter: RequestRouting {
    let store: StateStore
    let membership: Membership
    let client: HTTPClient
    let waitBound: Duration
    let forwardTimeout: Duration
    let logger: Logger
    /// While Kafka cannot be reached no owner can appear (the group cannot rebalance): no waiting then.
    var kafka: KafkaHealth? = nil

    func route(app: String, forwarded: Bool) async -> RouteDecision {
        let deadline = ContinuousClock.now + waitBound
        while true {
            let partition = store.partitionIndex(ofApp: app)
            if partition >= 0 {
                switch membership.route(partition: partition) {
                case .local(ready: true) where store.ownedPartition(ofApp: app) != nil:
                    return .local
                case .remote(let address, ready: true) where !forwarded:
                    return .remote(address: address)
                case .remote, .unknown:
                    // A forwarded call is answered by its owner or refused, never forwarded again.
                    if forwarded { return .unavailable(reason: "this replica does not own the application's partition") }
                default:
                    break
                }
            }
            if partition >= 0, let reason = kafka?.notWritableReason {
                return .unavailable(reason: "no replica serves the application's partition right now: \(reason); retry")
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

    func forward(_ request: ForwardedRequest, to address: String) async -> ForwardedResponse? {
        let call = HTTPRequest(
            method: HTTPMethod(rawValue: request.method), url: address + request.pathAndQuery, headers: request.headers,
            body: request.body, timeout: forwardTimeout)
        var http1 = call
        http1.http1 = true
        do {
            let response = try await client.send(http1)
            return ForwardedResponse(status: response.status, headers: response.headers, body: response.body)
        } catch {
            logger.warning("forwarding to the owner failed", metadata: ["owner": "\(address)", "error": "\(error)"])
            // The owner is gone (killed, say) but still in the view until the group reassigns its partitions: the
            // caller asks again, so wait for the view to change first (a share of the bound), or all its attempts
            // would fail within milliseconds and the call get 503 without waiting for the new owner.
            await membership.waitForChange(timeout: waitBound / Forwarding.maximumAttempts)
            return nil
        }
    }
}
