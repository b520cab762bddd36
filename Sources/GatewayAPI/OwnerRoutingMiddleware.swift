import Foundation
import Hummingbird
import HTTPTypes

/// Sends each subscription call (`/base/{app}/…`, `/datasync/v2/{app}/…`, `/admin/apps/{app}`) to the replica that owns the app's
/// partition: answered here when this replica owns it, forwarded otherwise (status, headers and body of the
/// owner's answer pass through unchanged). A forwarded call carries `x-push-forwarded` and is never forwarded
/// again: a replica that no longer owns the partition refuses it with `x-push-not-owner`, and the forwarding
/// replica asks again, until its bound; then `503` with `Retry-After`.
struct OwnerRoutingMiddleware<Context: RequestContext>: RouterMiddleware {
    static var forwardedHeader: HTTPField.Name { HTTPField.Name("x-push-forwarded")! }
    static var notOwnerHeader: HTTPField.Name { HTTPField.Name("x-push-not-owner")! }
    /// Request headers the owner needs (the rest describe the connection, not the call).
    static var passedHeaders: [HTTPField.Name] { [.authorization, .contentType, .accept] }
    static var maximumBody: Int { 64 * 1024 }

    let routing: any RequestRouting

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let app = Self.app(of: request.uri.path) else { return try await next(request, context) }
        let forwarded = request.headers[Self.forwardedHeader] != nil
        var request = request
        var body: [UInt8]?
        var attempts = 0
        while true {
            switch await routing.route(app: app, forwarded: forwarded) {
            case .local:
                if let body { request.body = .init(buffer: ByteBuffer(bytes: body)) }
                return try await next(request, context)
            case .unavailable(let reason):
                var response = Routes.errorResponse(.unavailable(reason, retryAfterSeconds: 1))
                if forwarded { response.headers[Self.notOwnerHeader] = "1" }
                return response
            case .remote(let address):
                if body == nil {
                    let buffer = try await request.body.collect(upTo: Self.maximumBody)
                    body = Array(buffer.readableBytesView)
                }
                var headers: [(name: String, value: String)] = [(Self.forwardedHeader.rawName, "1")]
                for name in Self.passedHeaders {
                    for value in request.headers[values: name] { headers.append((name.rawName, value)) }
                }
                let call = ForwardedRequest(
                    method: request.method.rawValue, pathAndQuery: request.uri.description, headers: headers, body: body ?? [])
                attempts += 1
                if let answer = await routing.forward(call, to: address),
                    !answer.headers.contains(where: { $0.name.lowercased() == Self.notOwnerHeader.canonicalName })
                {
                    return Self.response(answer)
                }
                // Not the owner any more, or unreachable: the view is stale; ask again (the router waits for a
                // change, bounded).
                if attempts >= Forwarding.maximumAttempts {
                    return Routes.errorResponse(.unavailable("the application's owner cannot be reached; retry", retryAfterSeconds: 1))
                }
            }
        }
    }

    static func response(_ answer: ForwardedResponse) -> Response {
        var fields = HTTPFields()
        for (name, value) in answer.headers {
            guard let field = HTTPField.Name(name) else { continue }
            switch field {
            case .contentLength, .transferEncoding, .connection: continue
            default: fields.append(HTTPField(name: field, value: value))
            }
        }
        return Response(
            status: HTTPResponse.Status(code: answer.status), headers: fields,
            body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }

    /// The app a subscription call is about, percent-decoded; nil for other paths.
    static func app(of path: String) -> String? {
        let parts = path.slashSeparatedParts()
        guard parts.count >= 4 else { return nil }
        if parts[1] == "base", parts[3] == ".wakeup" { return parts[2].removingPercentEncoding }
        if parts.count >= 5, parts[1] == "datasync", parts[2] == "v2", parts[4] == "subscriptions" {
            return parts[3].removingPercentEncoding
        }
        if parts.count == 4, parts[1] == "admin", parts[2] == "apps", !parts[3].isEmpty { return parts[3].removingPercentEncoding }
        return nil
    }
}
