/// The OpenAPI document served at `/openapi.json` (source of truth: docs/openapi.json, kept identical by a test).
public enum OpenAPIDocument {
    public static let json = #"""
{"openapi":"3.0.3","info":{"title":"PushGateway","version":"0.1.0"},"paths":{}}
"""#
}
