import Foundation
import Providers
import SSLCrypto

/// An app's `apns:` settings (docs/CONFIGURATION.md): what its `kind: "apns"` subscriptions need, from the app's
/// Apple developer account. Without them the app refuses apns subscriptions.
public struct APNsSettings: Decodable, Sendable, Equatable {
    /// The team id (10 characters), the `iss` of every provider token.
    public var teamId = ""
    /// The id of the APNs auth key (10 characters), the provider token's `kid`.
    public var keyId = ""
    /// The `.p8` file Apple gave for that key: a P-256 private key, PKCS#8 PEM.
    public var keyFile = ""
    /// The app's bundle id: the `apns-topic` of every push.
    public var bundleId = ""
    /// `production` (App Store and TestFlight builds) or `development` (builds signed for development): which APNs
    /// host the app's devices are reached through (`apns.baseURL` or `apns.developmentBaseURL`).
    public var environment = "production"

    public init() {}

    enum CodingKeys: String, CodingKey { case teamId, keyId, keyFile, bundleId, environment }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        teamId = try c.decodeIfPresent(String.self, forKey: .teamId) ?? teamId
        keyId = try c.decodeIfPresent(String.self, forKey: .keyId) ?? keyId
        keyFile = try c.decodeIfPresent(String.self, forKey: .keyFile) ?? keyFile
        bundleId = try c.decodeIfPresent(String.self, forKey: .bundleId) ?? bundleId
        environment = try c.decodeIfPresent(String.self, forKey: .environment) ?? environment
    }

    func validate() throws(ConfigurationError) {
        func isAppleID(_ text: String) -> Bool {
            text.utf8.count == 10 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) }
        }
        guard isAppleID(teamId) else { throw ConfigurationError("apns.teamId must be the team's 10-character id (A-Z, 0-9)") }
        guard isAppleID(keyId) else { throw ConfigurationError("apns.keyId must be the auth key's 10-character id (A-Z, 0-9)") }
        guard !bundleId.isEmpty, bundleId.utf8.count <= 255, !bundleId.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) else {
            throw ConfigurationError("apns.bundleId must be the app's bundle id (printable ASCII, no spaces)")
        }
        guard APNsClient.Environment(rawValue: environment) != nil else {
            throw ConfigurationError("apns.environment must be production or development")
        }
        guard !keyFile.isEmpty else { throw ConfigurationError("apns.keyFile is required (the .p8 auth key)") }
    }

    /// The auth key of `keyFile`.
    public func key() throws(ConfigurationError) -> ECPrivateKey {
        let text: String
        do {
            text = try String(contentsOfFile: keyFile, encoding: .utf8)
        } catch {
            throw ConfigurationError("apns.keyFile \(keyFile): cannot read it")
        }
        do {
            return try ECPrivateKey(pem: text)
        } catch {
            throw ConfigurationError("apns.keyFile \(keyFile): not a P-256 private key in PEM (\(error))")
        }
    }

    /// What identifies the credentials (a profile reload keeps the sender, and its provider token, when unchanged).
    func fingerprint(key: ECPrivateKey) throws -> String {
        "\(teamId)\u{0}\(keyId)\u{0}\(bundleId)\u{0}\(environment)\u{0}\(try key.pemRepresentation())"
    }
}
