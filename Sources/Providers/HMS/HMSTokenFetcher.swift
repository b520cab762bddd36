/// Obtains access tokens with Huawei's OAuth 2.0 client-credentials grant: `POST {tokenURL}` with the form
/// `grant_type=client_credentials&client_id=…&client_secret=…`, answered by
/// `{"access_token":"…","expires_in":3600,"token_type":"Bearer"}` or, on failure (HTTP 400/401),
/// `{"error":1101,"sub_error":20356,"error_description":"invalid client_secret"}` (read by
/// ``OAuthTokenEndpoint``).
struct HMSTokenFetcher: Sendable {
    let credentials: HMSCredentials
    let endpoint: OAuthTokenEndpoint<HMSError>
    let now: @Sendable () -> Double

    /// The form body, each value percent-encoded (RFC 3986 unreserved characters kept).
    func formBody() -> [UInt8] {
        var body: [UInt8] = []
        body.reserveCapacity(96 + credentials.clientId.utf8.count + credentials.clientSecret.utf8.count * 3)
        body.append(contentsOf: "grant_type=client_credentials&client_id=".utf8)
        Self.percentEncode(credentials.clientId, into: &body)
        body.append(contentsOf: "&client_secret=".utf8)
        Self.percentEncode(credentials.clientSecret, into: &body)
        return body
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// `application/x-www-form-urlencoded` value encoding: `A-Z a-z 0-9 - . _ ~` as is, every other byte `%XX`.
    static func percentEncode(_ value: String, into output: inout [UInt8]) {
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: "~"):
                output.append(byte)
            default:
                output.append(UInt8(ascii: "%"))
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0x0F)])
            }
        }
    }

    /// Fetches a new access token. Errors are ``HMSError``s with source `.authentication` (or `.cancelled`).
    func fetch() async throws(HMSError) -> OAuthAccessToken {
        let startedAt = now()
        return try await endpoint.fetch(grant: formBody(), requestedAt: startedAt)
    }
}
