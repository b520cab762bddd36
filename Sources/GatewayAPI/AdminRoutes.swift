import Foundation
import Hummingbird
import PushCore

/// `GET /admin/apps` and `GET /admin/apps/{app}` (``AdminAPI``).
enum AdminRoutes {
    static func add(to router: Router<GatewayRequestContext>, api: some AdminAPI) {
        router.get("/admin/apps") { request, _ in
            await respond {
                () async throws(APIError) -> Response in
                try api.authorizeAdmin(bearer: V2Routes.bearer(request))
                return json(try await api.apps())
            }
        }
        router.get("/admin/apps/:app") { request, _ in
            await respond {
                () async throws(APIError) -> Response in
                try api.authorizeAdmin(bearer: V2Routes.bearer(request))
                let parts = request.uri.path.slashSeparatedParts()
                guard parts.count == 4, let app = parts[3].removingPercentEncoding, !app.isEmpty else {
                    throw .badRequest("expected /admin/apps/{app}")
                }
                return json(try await api.app(app))
            }
        }
    }

    private static func respond(_ body: () async throws(APIError) -> Response) async -> Response {
        do {
            return try await body()
        } catch {
            return Routes.errorResponse(error)
        }
    }

    private static func json(_ value: JSONValue) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: JSONWriter.bytes(value))))
    }
}
