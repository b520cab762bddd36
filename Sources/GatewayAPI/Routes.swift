import Foundation
import HTTPTypes
import Hummingbird
import PushCore

/// The HTTP routes: v1 wake-up API, operations endpoints, the OpenAPI document.
public enum Routes {
    /// With `routing`, subscription calls for apps whose partition another replica owns are forwarded there.
    /// `trustedProxies`: whose `X-Forwarded-For` names the client (``ClientAddress``). `metrics`: where each call's
    /// duration is recorded.
    public static func router(
        subscriptions: some SubscriptionAPI, v2: some V2SubscriptionAPI, probe: some OperationsProbe,
        routing: (any RequestRouting)? = nil, admin: (any AdminAPI)? = nil, trustedProxies: TrustedProxies = .none,
        metrics: (any HTTPRequestMetrics)? = nil
    ) -> Router<GatewayRequestContext> {
        let router = Router(context: GatewayRequestContext.self)
        if let metrics { router.add(middleware: HTTPMetricsMiddleware(metrics: metrics)) }
        router.add(middleware: UnmatchedRouteMiddleware())
        if let routing {
            // A forwarded call carries the original client's address (resolved here, on the replica it reached).
            router.add(
                middleware: OwnerRoutingMiddleware(
                    routing: routing, admin: admin,
                    clientAddress: { request, context in
                        ClientAddress.resolve(peer: context.remoteAddress?.ipAddress, headers: request.headers, trusted: trustedProxies)
                    }))
        }
        router.add(middleware: ClientAddressMiddleware(trusted: trustedProxies))
        // Operations endpoints answer GET and HEAD (HEAD: same status and headers, no body).
        func getAndHead(_ path: String, _ handler: @escaping @Sendable () -> Response) {
            router.get(RouterPath(path)) { _, _ in handler() }
            router.head(RouterPath(path)) { _, _ in
                var response = handler()
                response.body = .init()
                return response
            }
        }
        getAndHead("/healthz") { jsonResponse(.ok, #"{"status":"ok"}"#) }
        getAndHead("/readyz") {
            if let reason = probe.notReadyReason() {
                return errorResponse(APIError(.serviceUnavailable, "not_ready", reason))
            }
            return jsonResponse(.ok, #"{"status":"ready"}"#)
        }
        getAndHead("/metrics") {
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(string: probe.metricsText())))
        }
        getAndHead("/openapi.json") {
            Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(bytes: OpenAPIDocument.bytes)))
        }

        @Sendable func wakeup(_ request: Request, _ context: GatewayRequestContext) async -> Response {
            do throws(APIError) {
                let target = try WakeupTarget(try context.apiPath(of: request))
                let query = request.uri.queryParameters
                guard let deviceID = query["id"].map(String.init), !deviceID.isEmpty else {
                    throw .badRequest("the query parameter 'id' (the device's push token) is required")
                }
                try validateDeviceID(deviceID)
                let token = query["token"].map(String.init).flatMap { $0.isEmpty ? nil : $0 }
                let client = request.headers[ClientAddress.header] ?? "unknown"
                if request.method == .delete {
                    try await subscriptions.unsubscribe(
                        V1UnsubscribeRequest(app: target.app, path: target.path, deviceID: deviceID, authToken: token, clientAddress: client))
                } else {
                    let modeText = query["mode"].map(String.init) ?? ""
                    let mode: SubscriptionMode
                    if modeText.isEmpty || modeText == "null" {
                        mode = .noData
                    } else if let parsed = SubscriptionMode(rawValue: modeText) {
                        mode = parsed
                    } else {
                        throw .badRequest("unknown mode '\(modeText.prefix(64))': use noData, value or childEvent")
                    }
                    try await subscriptions.subscribe(
                        V1SubscribeRequest(
                            app: target.app, path: target.path, deviceID: deviceID, mode: mode, authToken: token, clientAddress: client))
                }
                return Response(status: .noContent)
            } catch {
                return errorResponse(error)
            }
        }
        for pattern in ["/base/:app/.wakeup", "/base/:app/.wakeup/**"] {
            router.put(RouterPath(pattern), use: wakeup)
            router.delete(RouterPath(pattern), use: wakeup)
        }
        V2Routes.add(to: router, api: v2)
        if let admin { AdminRoutes.add(to: router, api: admin) }
        return router
    }

    static func jsonResponse(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    /// `{"status": code, "message": text}` with the error's HTTP status.
    public static func errorResponse(_ error: APIError) -> Response {
        var body: [UInt8] = Array(#"{"status":"#.utf8)
        JSONWriter.writeString(error.code, into: &body)
        body.append(contentsOf: #","message":"#.utf8)
        JSONWriter.writeString(error.message, into: &body)
        body.append(UInt8(ascii: "}"))
        var headers: HTTPFields = [.contentType: "application/json"]
        if let seconds = error.retryAfterSeconds { headers[.retryAfter] = String(max(1, seconds)) }
        if error.notOwner, let name = HTTPField.Name("x-push-not-owner") { headers[name] = "1" }
        return Response(status: error.status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// Push tokens are opaque but printable ASCII and bounded (FCM's are ~160 bytes, HMS's ~130, APNs' 64):
/// refuse anything else before it is stored.
let maximumDeviceIDLength = 1024

func validateDeviceID(_ id: String) throws(APIError) {
    guard id.utf8.count <= maximumDeviceIDLength else {
        throw .badRequest("the device id is longer than \(maximumDeviceIDLength) bytes")
    }
    for byte in id.utf8 where byte <= 0x20 || byte >= 0x7F || byte == UInt8(ascii: "%") {
        // A '%' left after decoding means the query had broken percent-encoding.
        throw .badRequest("the device id must be printable ASCII without spaces (or broken percent-encoding)")
    }
}

/// The app and data path of a `/base/{app}/.wakeup/{path...}` call, validated.
struct WakeupTarget: Equatable {
    var app: String
    var path: DataPath

    init(_ apiPath: APIPath) throws(APIError) {
        // ["", "base", app, ".wakeup", keys...], decoded; empty keys kept, so that "/a//b" is refused rather than
        // silently normalised.
        let parts = apiPath.segments
        guard parts.count >= 4, parts[1] == "base", parts[3] == ".wakeup", !parts[2].isEmpty
        else { throw .badRequest("expected /base/{app}/.wakeup/{path}") }
        var keys = Array(parts.dropFirst(4))
        // One trailing "/" is normalised away; any other empty key is an error.
        if keys.last == "" { keys.removeLast() }
        if keys.contains("") { throw .badRequest(PathError.emptyKey.description) }
        do {
            self.path = try DataPath("/" + keys.joined(separator: "/"))
        } catch {
            throw .badRequest(error.description)
        }
        self.app = parts[2]
    }
}
