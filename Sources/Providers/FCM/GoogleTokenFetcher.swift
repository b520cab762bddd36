import CompactJSON
import SSLCrypto

/// Obtains access tokens with Google's OAuth2 JWT-bearer grant (RFC 7523): a JWT assertion signed with the
/// service account's key is POSTed to the token endpoint (``OAuthTokenEndpoint``, which reads the answer).
struct GoogleTokenFetcher: Sendable {
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    static let assertionLifetime = 3600

    let account: FCMServiceAccount
    let key: RSAPrivateKey
    /// Where the assertion is POSTed; its URL is also the assertion's `aud`.
    let endpoint: OAuthTokenEndpoint<FCMError>
    let now: @Sendable () -> Double

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
        claims.string(endpoint.url)
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

    /// Fetches a new access token. Errors are ``FCMError``s with source `.authentication` (or `.cancelled`).
    func fetch() async throws(FCMError) -> OAuthAccessToken {
        let startedAt = now()
        let assertion: String
        do {
            assertion = try makeAssertion(issuedAt: Int(startedAt))
        } catch {
            throw FCMError(source: .authentication, message: "cannot sign the JWT assertion: \(error)")
        }
        // The assertion is base64url and dots only: nothing to percent-encode.
        let grant = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        return try await endpoint.fetch(grant: Array(grant.utf8), requestedAt: startedAt)
    }
}
