import Hummingbird

/// Answers requests no route takes with the API's JSON errors: 405 with `Allow` when the path exists under
/// other methods, 404 otherwise (Hummingbird's default is an empty 404 for both).
struct UnmatchedRouteMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            if let allowed = Self.allowedMethods(path: request.uri.path) {
                var response = Routes.errorResponse(
                    APIError(.methodNotAllowed, "method_not_allowed", "\(request.method) is not allowed here; use \(allowed)"))
                response.headers[.allow] = allowed
                return response
            }
            return Routes.errorResponse(APIError(.notFound, "not_found", "no such endpoint"))
        }
    }

    static func allowedMethods(path: String) -> String? {
        switch path {
        case "/healthz", "/readyz", "/metrics", "/openapi.json": return "GET, HEAD"
        default:
            let parts = path.slashSeparatedParts()
            if parts.count >= 4, parts[1] == "base", parts[3] == ".wakeup" { return "PUT, DELETE" }
            if (parts.count == 3 || parts.count == 4), parts[1] == "admin", parts[2] == "apps" { return "GET" }
            return nil
        }
    }
}
