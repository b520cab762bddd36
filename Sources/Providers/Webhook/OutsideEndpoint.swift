import CurlHTTP
import PushCore

/// What deliveries to an outside URL share (webhooks, Web Push endpoints, event hooks): the address check just
/// before the request, and the request sent pinned to the address checked, its transport errors read as outcomes.
enum OutsideEndpoint {
    /// The address to connect to for `url`: the first its host resolves to, once every one of them is public (or
    /// `allowPrivate`). A name that does not resolve is retried (`unresolved`); one that reaches a refused address is
    /// the receiver's fault (`address_refused`): dropped, nobody revoked.
    static func address(of url: WebhookURL, resolver: HostResolver, allowPrivate: Bool) async -> Result<IPAddress, DeliveryFailure> {
        let addresses = await resolver.resolve(url.host)
        guard let first = addresses.first else {
            return .failure(DeliveryFailure(reason: "unresolved", classification: .retryable))
        }
        if !allowPrivate, addresses.contains(where: { $0.refusal != nil }) {
            return .failure(DeliveryFailure(reason: "address_refused", classification: .rejected))
        }
        return .success(first)
    }

    /// Sends `request` connected to `address` (so a name that resolves elsewhere between the check and the connection,
    /// DNS rebinding, cannot reach a refused address), trusting `caFile` when given; `submission` is marked when the
    /// request is handed to the HTTP client. Timeouts, transport errors and cancellation are retried.
    static func send(
        _ request: HTTPRequest, to address: IPAddress, caFile: String?, http: HTTPClient, submission: RequestSubmission?
    ) async -> Result<HTTPResponse, DeliveryFailure> {
        var request = request
        request.connectAddress = address.description
        request.caFile = caFile
        return await http.deliveryAnswer(to: request, submission: submission)
    }
}
