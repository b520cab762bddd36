import CompactJSON

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The fields of a Google service-account key file (`type: service_account`) that FCM needs.
/// The description never shows the private key.
public struct FCMServiceAccount: Sendable, CustomStringConvertible {
    /// Why a service-account document was refused.
    public struct ParseError: Error, Sendable, CustomStringConvertible {
        public let message: String
        public var description: String { "invalid FCM service account: \(message)" }
    }

    /// Google's token endpoint, used when the file has no `token_uri`.
    public static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    /// `project_id`: the Firebase project messages are sent for.
    public let projectID: String
    /// `client_email`: the issuer of the JWT assertion.
    public let clientEmail: String
    /// `private_key`: PEM (PKCS#8) RSA key signing the assertion.
    public let privateKeyPEM: String
    /// `private_key_id`: the `kid` of the assertion.
    public let privateKeyID: String
    /// `token_uri`: the OAuth2 token endpoint (and the assertion's audience).
    public let tokenURI: String

    public init(projectID: String, clientEmail: String, privateKeyPEM: String, privateKeyID: String, tokenURI: String) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKeyPEM = privateKeyPEM
        self.privateKeyID = privateKeyID
        self.tokenURI = tokenURI
    }

    /// Parses the JSON key file's contents.
    public init(json: some Collection<UInt8>) throws(ParseError) {
        let document: JSONValue
        do {
            document = try JSONParser.parse(json)
        } catch {
            throw ParseError(message: error.description)
        }
        func field(_ name: String, required: Bool = true) throws(ParseError) -> String? {
            guard let value = document[name] else {
                if required { throw ParseError(message: "missing \"\(name)\"") }
                return nil
            }
            guard let text = value.stringValue, !text.isEmpty else {
                throw ParseError(message: "\"\(name)\" must be a non-empty string")
            }
            return text
        }
        if let type = try field("type", required: false), type != "service_account" {
            throw ParseError(message: "\"type\" is \"\(type)\", expected \"service_account\"")
        }
        let projectID = try field("project_id") ?? ""
        guard projectID.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
        else { throw ParseError(message: "\"project_id\" has characters not allowed in a project id") }
        self.init(
            projectID: projectID,
            clientEmail: try field("client_email") ?? "",
            privateKeyPEM: try field("private_key") ?? "",
            privateKeyID: try field("private_key_id") ?? "",
            tokenURI: try field("token_uri", required: false) ?? Self.defaultTokenURI)
    }

    /// Reads and parses a JSON key file.
    public init(contentsOfFile path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        try self.init(json: Array(data))
    }

    public var description: String {
        "FCMServiceAccount(project: \(projectID), client: \(clientEmail), key: \(privateKeyID.prefix(8))…)"
    }
}
