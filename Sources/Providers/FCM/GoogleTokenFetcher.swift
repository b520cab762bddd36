import CompactJSON
import CurlHTTP
import Logging
import SSLCrypto

/// Obtains access tokens with Google's OAuth2 JWT-bearer grant (RFC 7523): a JWT assertion signed with the
/// service account's key is POSTed to the token endpoint.
struct GoogleTokenFetcher: Sendable {
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    static let assertionLifetime = 3600

    let account: FCMServiceAccount
    let key: RSAPrivateKey
    let http: HTTPClient
    /// Where the assertion is POSTed; also its `aud`.
    let tokenURL: String
    let timeout: Duration
    let now: @Sendable () -> Double
    let logger: Logger

    /// The signed assertion: header `{"alg":"RS256","typ":"JWT","kid":private_key_id}`, claims
    /// `{"iss":client_email,"scope":…,"aud":token URL,"iat":now,"exp":now+3600}`.
    func makeAssertion(issuedAt: Int) throws -> String {
        var header = JSONStreamWriter(reservingCapacity: 96)
        header.raw(#"{"alg":"RS256","typ":"JWT","kid":"#)
        header.string(account.privateKeyID)
        header.raw("}")
        var claims = JSONStreamWriter(reservingCapacity: 256)
        claims.raw(#"{"iss":"#)
        claims.string(account.clientEmail)
        claims.raw(#","scope":"#)
        claims.string(Self.scope)
        claims.raw(#","aud":"#)
        claims.string(tokenURL)
        claims.raw(#","iat":"#)
        claims.integer(issuedAt)
        claims.raw(#","exp":"#)
        claims.integer(issuedAt + Self.assertionLifetime)
        claims.raw("}")
        var signingInput: [UInt8] = []
        Base64URL.encode(header.bytes, into: &signingInput)
        signingInput.append(UInt8(ascii: "."))
        Base64URL.encode(claims.bytes, into: &signingInput)
        let signature = try key.signRS256(signingInput)
        signingInput.append(UInt8(ascii: "."))
        Base64URL.encode(signature, into: &signingInput)
        return String(decoding: signingInput, as: UTF8.self)
    }

    /// Fetches a new access token. Errors are ``FCMError``s with source `.authentication`.
    func fetch() async throws(FCMError) -> OAuthAccessToken {
        let startedAt = now()
        let assertion: String
        do {
            assertion = try makeAssertion(issuedAt: Int(startedAt))
        } catch {
            throw FCMError(source: .authentication, message: "cannot sign the JWT assertion: \(error)")
        }
        // The assertion is base64url and dots only: nothing to percent-encode.
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        let request = HTTPRequest(
            method: .post, url: tokenURL,
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
            body: Array(body.utf8), timeout: timeout)
        let response: HTTPResponse
        do {
            response = try await http.send(request)
        } catch let error as HTTPClientError {
            throw FCMError(
                source: .authentication, message: "token endpoint unreachable: \(error.message)",
                transportError: error)
        } catch {
            throw FCMError(source: .cancelled, message: "token request cancelled")
        }
        let document = try? JSONParser.parse(response.body)
        guard response.status == 200 else {
            // Google: {"error":"invalid_grant","error_description":"Invalid JWT Signature."}
            let error = FCMError(
                source: .authentication, httpStatus: response.status,
                status: document?["error"]?.stringValue,
                message: "token endpoint refused: " + (document?["error_description"]?.stringValue ?? "HTTP \(response.status)"),
                retryAfterSeconds: response.header("retry-after").flatMap { RetryAfter.seconds(from: $0) })
            logger.error("FCM OAuth token request failed", metadata: [
                "fcm.client_email": "\(account.clientEmail)", "http.status": "\(response.status)",
                "oauth.error": "\(error.status ?? "-")", "error.message": "\(error.message)",
            ])
            throw error
        }
        guard let token = document?["access_token"]?.stringValue, !token.isEmpty,
              let expiresIn = document?["expires_in"]?.doubleValue, expiresIn > 0
        else {
            throw FCMError(
                source: .authentication, httpStatus: response.status,
                message: "token endpoint answered 200 without access_token/expires_in")
        }
        if let type = document?["token_type"]?.stringValue, type.lowercased() != "bearer" {
            throw FCMError(
                source: .authentication, httpStatus: response.status,
                message: "token endpoint issued an unsupported token_type \(type)")
        }
        logger.info("FCM OAuth token obtained", metadata: [
            "fcm.client_email": "\(account.clientEmail)", "oauth.token": "\(Redaction.fingerprint(token))",
            "oauth.expires_in": "\(expiresIn)",
        ])
        return OAuthAccessToken(value: token, obtainedAt: startedAt, expiresAt: startedAt + expiresIn)
    }
}
