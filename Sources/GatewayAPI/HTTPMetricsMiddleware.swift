import HTTPTypes
import Hummingbird

/// Where the duration of each HTTP call is recorded (OpenTelemetry's `http.server.request.duration`).
public protocol HTTPRequestMetrics: Sendable {
    /// One call answered: `route` is the matched route pattern (`/base/:app/.wakeup/**`; `unmatched` when no route
    /// matched), never the raw path, so that the labels keep a low cardinality.
    func requestFinished(route: String, method: String, status: Int, duration: Duration)
}

/// Times every call, from the router's receipt of the request to its answer (every body the API writes is in
/// memory by then: the time to write it is the connection's, not the call's).
struct HTTPMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: any HTTPRequestMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let method = Self.methodLabel(request.method)
        do {
            let response = try await next(request, context)
            metrics.requestFinished(
                route: context.endpointPath ?? "unmatched", method: method, status: response.status.code,
                duration: ContinuousClock.now - started)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.requestFinished(
                route: context.endpointPath ?? "unmatched", method: method, status: status, duration: ContinuousClock.now - started)
            throw error
        }
    }

    /// The method, or `_OTHER` for one the API does not know (OpenTelemetry's rule: a client cannot add series).
    static func methodLabel(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .head, .put, .post, .delete, .options, .patch: method.rawValue
        default: "_OTHER"
        }
    }
}
