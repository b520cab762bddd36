import CompactJSON
import SSLCrypto
import Synchronization

/// APNs token-based authentication: the provider token, an ES256 JWT signed with the team's `.p8` key (header
/// `{"alg":"ES256","kid":<key id>}`, claims `{"iss":<team id>,"iat":<seconds>}`), sent as
/// `authorization: bearer <token>`.
///
/// Apple answers `ExpiredProviderToken` to a token made more than an hour ago, and `TooManyProviderTokenUpdates` to a
/// team that changes its token more often than every 20 minutes. So one token serves every request for
/// ``renewAfter`` (50 minutes), and a refused token is replaced only once it is ``minimumAge`` (20 minutes) old:
/// a younger one refused says something else is wrong (the key, the team or the clock), which renewing would not cure.
public final class APNsProviderToken: Sendable {
    /// A token is replaced this long after it was made (Apple refuses it after 60 minutes).
    public static let renewAfter: Double = 50 * 60
    /// A token is never replaced sooner than this after it was made (Apple's limit on updates).
    public static let minimumAge: Double = 20 * 60

    public let teamID: String
    public let keyID: String
    private let key: ECPrivateKey
    private let clock: @Sendable () -> Double
    /// The current token and when it was made (the clock's seconds).
    private let current = Mutex<(token: String, issuedAt: Double)?>(nil)

    /// `key` is the `.p8` file's key (PKCS#8 PEM, P-256: ``ECPrivateKey/init(pem:)``); `clock` gives seconds since
    /// the epoch (the `iat` claim).
    public init(teamID: String, keyID: String, key: ECPrivateKey, clock: @escaping @Sendable () -> Double) {
        self.teamID = teamID
        self.keyID = keyID
        self.key = key
        self.clock = clock
    }

    /// The token to send now: the current one, or a new one once the current one is ``renewAfter`` old. Signed
    /// under the lock (once in 50 minutes): callers that find it due at once make one token, not one each.
    public func token() throws -> String {
        let now = clock()
        return try current.withLock { current in
            if let cached = current, now - cached.issuedAt < Self.renewAfter { return cached.token }
            let made = try sign(issuedAt: now)
            current = (made, now)
            return made
        }
    }

    /// APNs refused `token` (`ExpiredProviderToken`, `InvalidProviderToken`): it is dropped, so that the next
    /// request signs a new one, when it is still the current token and at least ``minimumAge`` old. Returns whether it
    /// was dropped (false: renewing now would break Apple's limit or change nothing; the refusal is reported as ours).
    @discardableResult
    public func refused(_ token: String) -> Bool {
        let now = clock()
        return current.withLock { current in
            guard let existing = current, existing.token == token, now - existing.issuedAt >= Self.minimumAge else { return false }
            current = nil
            return true
        }
    }

    /// The JWT for `issuedAt` (whole seconds).
    func sign(issuedAt: Double) throws -> String {
        var header: [UInt8] = Array(#"{"alg":"ES256","kid":"#.utf8)
        JSONWriter.writeString(keyID, into: &header)
        header.append(UInt8(ascii: "}"))
        var claims: [UInt8] = Array(#"{"iss":"#.utf8)
        JSONWriter.writeString(teamID, into: &claims)
        claims += Array(#","iat":\#(Int64(issuedAt.rounded(.down)))}"#.utf8)
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        return signingInput + "." + Base64URL.encode(try key.signES256(Array(signingInput.utf8)))
    }
}
