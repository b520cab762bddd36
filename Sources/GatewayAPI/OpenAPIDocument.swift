/// The OpenAPI document served at `/openapi.json`: the file `Resources/openapi.json` (also `docs/openapi.json`, a
/// link to it), embedded in the binary by the package manager, byte for byte.
public enum OpenAPIDocument {
    public static var bytes: [UInt8] { PackageResources.openapi_json }
}
