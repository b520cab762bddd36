import PushCore

/// The operators' per-app status (SPEC §8): `GET /admin/apps` and `GET /admin/apps/{app}`, behind an admin
/// bearer token that the configuration provides (no token configured: the endpoints answer 403 `disabled`).
public protocol AdminAPI: Sendable {
    /// 401 without a bearer token, 403 with a wrong one or when no admin token is configured.
    func authorizeAdmin(bearer: String?) throws(APIError)
    /// Every configured app, with where it is served.
    func apps() async throws(APIError) -> JSONValue
    /// One app's status, answered by the replica that owns its partition.
    func app(_ name: String) async throws(APIError) -> JSONValue
}
