import Foundation
import Hummingbird
import HTTPTypes

/// Sends each app call (`/base/{app}/…`, `/datasync/v2/{app}/…`, `/admin/apps/{app}`) to the replica that owns
/// the app's partition: answered here when this replica owns it, forwarded otherwise. The hop between replicas
/// is a trust boundary (docs/SECURITY.md), so:
///
/// - Only what the API reads is forwarded: an origin-form target rebuilt from its checked segments and known
///   query parameters (``ForwardTarget``), the methods the API has, bodies up to the API's own limit, and the
///   `Authorization` header (the only one the routes read). A dot-segment is 400 here, before anything else.
/// - Calls for apps this gateway does not serve, and admin calls without the admin token, are answered here.
/// - A forwarded call is signed with the cluster secret (method, target, body, the original client's address,
///   a timestamp and a nonce) and carries `x-push-forwarded`; the owner checks the signature before anything
///   else and answers or refuses (`x-push-not-owner`), never forwards again. Only an authentic hop may name the
///   client's address (`x-push-client-address`, then ``GatewayRequestContext/hopClient``); for every other call
///   ``ClientAddressMiddleware`` replaces the header with the address of the connection.
/// - One deadline (`http.ownerWaitMs`) bounds the whole call. At most ``Forwarding/maximumAttempts`` attempts:
///   a call is sent again only after a "not owner" answer or when the owner certainly never acted on it
///   (`HTTPClientError.wasNeverActedOn`): refused before a byte of it was written, or, a write being sent once,
///   reset by the owner before it read it (a replica that stops closes connections whose requests it has not read;
///   an HTTP/1.1 request is handled only once read whole). A call that may have reached the owner without an
///   answer is never sent again: a write then gets `504 timeout` (its outcome is unknown: read before retrying).
/// - The owner's answer passes back with its status (1xx is not relayed: 502), body and the API's headers.
struct OwnerRoutingMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    static var forwardedHeader: HTTPField.Name { HTTPField.Name("x-push-forwarded")! }
    static var notOwnerHeader: HTTPField.Name { HTTPField.Name("x-push-not-owner")! }
    static var clientAddressHeader: HTTPField.Name { HTTPField.Name("x-push-client-address")! }
    /// Request headers the owner needs (the routes read no other; the rest describe the connection).
    static var passedHeaders: [HTTPField.Name] { [.authorization] }

    let routing: any RequestRouting
    let admin: (any AdminAPI)?
    /// The address of the client of a call received from outside (its peer, or `X-Forwarded-For` from a trusted
    /// proxy).
    let clientAddress: @Sendable (Request, Context) -> String

    init(routing: any RequestRouting, admin: (any AdminAPI)?, clientAddress: @escaping @Sendable (Request, Context) -> String) {
        self.routing = routing
        self.admin = admin
        self.clientAddress = clientAddress
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        var context = context
        let forwarded = request.headers[Self.forwardedHeader] != nil
        let path: APIPath
        do throws(APIError) {
            path = try APIPath(request.uri.path)
        } catch {
            guard APIPath.looksLikeAppCall(request.uri.path) else { return try await passOn(request, context, forwarded, next) }
            return Routes.errorResponse(error)
        }
        guard let call = path.call else { return try await passOn(request, context, forwarded, next) }
        context.apiPath = path
        let target: ForwardTarget
        do throws(APIError) {
            target = try ForwardTarget(
                target: request.uri.string, path: path,
                queryParameters: request.uri.queryParameters.map { (String($0.key), String($0.value)) })
        } catch {
            return Routes.errorResponse(error)
        }
        if forwarded {
            return try await answerForwarded(request, app: call.app, context: context, next: next)
        }
        // Answered here without asking anyone: apps not served (404/403 from the routes), methods the API does not
        // have, and admin calls without the admin token.
        guard routing.serves(app: call.app), Forwarding.methods.contains(request.method) else {
            return try await next(request, context)
        }
        if call.isAdmin, let admin {
            do throws(APIError) {
                try admin.authorizeAdmin(bearer: V2Routes.bearer(request))
            } catch {
                return Routes.errorResponse(error)
            }
        }
        let deadline = ContinuousClock.now + routing.ownerWait
        var body: [UInt8]?
        var attempts = 0
        while true {
            switch await routing.route(app: call.app, forwarded: false, deadline: deadline) {
            case .local:
                // Kept, so that the call can still go to the new owner if this replica turns out to have lost the
                // partition just now (its answer then says `x-push-not-owner`; the call had no effect).
                if body == nil {
                    do {
                        body = Array(try await request.body.collect(upTo: Forwarding.maximumBody).readableBytesView)
                    } catch {
                        return Routes.errorResponse(
                            APIError(.contentTooLarge, "too_big", "the request body is larger than \(Forwarding.maximumBody) bytes"))
                    }
                }
                request.body = .init(buffer: ByteBuffer(bytes: body ?? []))
                var response = try await next(request, context)
                guard response.headers[Self.notOwnerHeader] != nil else { return response }
                attempts += 1
                if attempts >= Forwarding.maximumAttempts || ContinuousClock.now >= deadline {
                    response.headers[Self.notOwnerHeader] = nil
                    return response
                }
            case .unavailable(let reason):
                return Routes.errorResponse(.unavailable(reason, retryAfterSeconds: 1))
            case .remote(let address):
                if body == nil {
                    do {
                        let buffer = try await request.body.collect(upTo: Forwarding.maximumBody)
                        body = Array(buffer.readableBytesView)
                    } catch {
                        return Routes.errorResponse(
                            APIError(.contentTooLarge, "too_big", "the request body is larger than \(Forwarding.maximumBody) bytes"))
                    }
                }
                var headers: [(name: String, value: String)] = [
                    (Self.forwardedHeader.canonicalName, "1"), (Self.clientAddressHeader.canonicalName, clientAddress(request, context)),
                ]
                for name in Self.passedHeaders {
                    for value in request.headers[values: name] { headers.append((name.canonicalName, value)) }
                }
                let forwardedCall = ForwardedRequest(
                    method: request.method.rawValue, pathAndQuery: target.pathAndQuery, headers: headers, body: body ?? [])
                attempts += 1
                switch await routing.forward(forwardedCall, to: address, deadline: deadline) {
                case .answered(let answer) where answer.header(Self.notOwnerHeader.canonicalName) == nil:
                    return Self.response(answer)
                case .answered, .mayBeSentAgain:
                    // Not the owner any more, or not reachable: the view is stale; ask again (the router waits for a
                    // change, within the deadline).
                    if attempts >= Forwarding.maximumAttempts || ContinuousClock.now >= deadline {
                        return Routes.errorResponse(.unavailable("the application's owner cannot be reached; retry", retryAfterSeconds: 1))
                    }
                case .unknown(let reason):
                    if request.method == .get {
                        return Routes.errorResponse(.unavailable("the application's owner did not answer: \(reason); retry", retryAfterSeconds: 1))
                    }
                    return Routes.errorResponse(
                        APIError(
                            .gatewayTimeout, "timeout",
                            "the replica that owns the application did not answer in time (\(reason)): the change may or may not have been made; read it before retrying"))
                }
            }
        }
    }

    /// Not an app call: answered by the routes (refused if it says it was forwarded).
    private func passOn(
        _ request: Request, _ context: Context, _ forwarded: Bool, _ next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if forwarded { return Routes.errorResponse(.badRequest("only app calls are forwarded between replicas")) }
        return try await next(request, context)
    }

    /// A call another replica forwarded here: authentic or refused; answered here or refused as "not owner".
    private func answerForwarded(
        _ request: Request, app: String, context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var request = request
        var context = context
        let body: [UInt8]
        do {
            body = Array(try await request.body.collect(upTo: Forwarding.maximumBody).readableBytesView)
        } catch {
            return Routes.errorResponse(APIError(.contentTooLarge, "too_big", "the request body is larger than \(Forwarding.maximumBody) bytes"))
        }
        var headers: [(name: String, value: String)] = []
        for field in request.headers { headers.append((field.name.canonicalName, field.value)) }
        let call = ForwardedRequest(method: request.method.rawValue, pathAndQuery: request.uri.string, headers: headers, body: body)
        guard case .authentic(let client) = routing.authenticate(forwarded: call) else {
            return Routes.errorResponse(
                APIError(.forbidden, "forbidden", "x-push-forwarded is for calls between replicas, signed with the cluster secret"))
        }
        context.hopClient = client
        request.body = .init(buffer: ByteBuffer(bytes: body))
        switch await routing.route(app: app, forwarded: true, deadline: .now) {
        case .local:
            return try await next(request, context)
        case .remote, .unavailable:
            var response = Routes.errorResponse(.unavailable("this replica does not own the application's partition", retryAfterSeconds: 1))
            response.headers[Self.notOwnerHeader] = "1"
            return response
        }
    }

    static func response(_ answer: ForwardedResponse) -> Response {
        guard (200...599).contains(answer.status) else {
            return Routes.errorResponse(APIError(.badGateway, "bad_gateway", "the owner answered with status \(answer.status)"))
        }
        var fields = HTTPFields()
        for (name, value) in answer.headers where Forwarding.answeredHeaders.contains(name.lowercased()) {
            guard let field = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: field, value: value))
        }
        return Response(
            status: HTTPResponse.Status(code: answer.status), headers: fields,
            body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}
