import CompactJSON
import CurlHTTP
import Logging

/// Obtains access tokens with Huawei's OAuth 2.0 client-credentials grant: `POST {tokenURL}` with the form
/// `grant_type=client_credentials&client_id=…&client_secret=…`, answered by
/// `{"access_token":"…","expires_in":3600,"token_type":"Bearer"}` or, on failure (HTTP 400/401),
/// `{"error":1101,"sub_error":20356,"error_description":"invalid client_secret"}`.
struct HMSTokenFetcher: Sendable {
    let credentials: HMSCredentials
    let http: HTTPClient
    let tokenURL: String
    let timeout: Duration
    let now: @Sendable () -> Double
    let logger: Logger

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

    /// The text of a JSON member that HMS writes as a number or a string (`"error":1101`).
    static func scalarText(_ value: JSONValue?) -> String? {
        switch value {
        case .number(let lexeme)?: lexeme
        case .string(let text)?: text
        default: nil
        }
    }

    /// Fetches a new access token. Errors are ``HMSError``s with source `.authentication` (or `.cancelled`).
    func fetch() async throws(HMSError) -> OAuthAccessToken {
        let startedAt = now()
        let request = HTTPRequest(
            method: .post, url: tokenURL,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
            body: formBody(), timeout: timeout)
        let response: HTTPResponse
        do {
            response = try await http.send(request)
        } catch let error as HTTPClientError {
            throw HMSError(
                source: .authentication, message: "token endpoint unreachable: \(error.message)",
                transportError: error)
        } catch {
            throw HMSError(source: .cancelled, message: "token request cancelled")
        }
        let document = try? JSONParser.parse(response.body)
        guard response.status == 200 else {
            let error = HMSError(
                source: .authentication, httpStatus: response.status,
                oauthError: Self.scalarText(document?["error"]),
                oauthSubError: Self.scalarText(document?["sub_error"]),
                message: "token endpoint refused: "
                    + (document?["error_description"]?.stringValue ?? "HTTP \(response.status)"),
                retryAfterSeconds: response.header("retry-after").flatMap { RetryAfter.seconds(from: $0) })
            logger.error("HMS OAuth token request failed", metadata: [
                "hms.client_id": "\(credentials.clientId)", "http.status": "\(response.status)",
                "oauth.error": "\(error.oauthError ?? "-")", "oauth.sub_error": "\(error.oauthSubError ?? "-")",
                "error.message": "\(error.message)",
            ])
            throw error
        }
        guard let token = document?["access_token"]?.stringValue, !token.isEmpty,
              let expiresIn = document?["expires_in"]?.doubleValue, expiresIn > 0
        else {
            throw HMSError(
                source: .authentication, httpStatus: response.status,
                message: "token endpoint answered 200 without access_token/expires_in")
        }
        if let type = document?["token_type"]?.stringValue, type.lowercased() != "bearer" {
            throw HMSError(
                source: .authentication, httpStatus: response.status,
                message: "token endpoint issued an unsupported token_type \(type)")
        }
        logger.info("HMS OAuth token obtained", metadata: [
            "hms.client_id": "\(credentials.clientId)", "oauth.token": "\(Redaction.fingerprint(token))",
            "oauth.expires_in": "\(expiresIn)",
        ])
        return OAuthAccessToken(value: token, obtainedAt: startedAt, expiresAt: startedAt + expiresIn)
    }
}
