import Auth
import Foundation
import Logging
import Synchronization
import XCTest
import Yams

@testable import Gateway

/// Issue 10, findings 5, 6 and 8 at the configuration level: issuer and audience settings, short HS256
/// secrets, parse errors that never quote the file, cleartext provider endpoints.
final class SettingsSecurityTests: XCTestCase {
    private let secret = "pgsecret-0f9e8d7c6b5a49382716"
    private let longSecret = "0123456789abcdef0123456789abcdef"

    // MARK: - Finding 5: issuer, audience, short secrets, the warning

    func testIssuerAndAudienceReachTheVerifier() throws {
        let yaml = """
            authKeys:
              - {alg: HS256, secret: "\(longSecret)"}
            issuer: https://securetoken.google.com/p1
            audience: p1
            """
        let settings = try YAMLDecoder().decode(AppSettings.self, from: yaml)
        XCTAssertEqual(settings.issuer, "https://securetoken.google.com/p1")
        XCTAssertEqual(settings.audience, "p1")
        let profile = try builder().build(name: "toto", settings: settings, previous: nil)
        XCTAssertEqual(profile.verifier?.issuer, "https://securetoken.google.com/p1")
        XCTAssertEqual(profile.verifier?.audience, "p1")
        // Absent: nothing checked.
        let plain = try YAMLDecoder().decode(AppSettings.self, from: "authKeys: [{alg: HS256, secret: \"\(longSecret)\"}]")
        XCTAssertNil(try builder().build(name: "toto", settings: plain, previous: nil).verifier?.issuer)
        // Empty strings are refused (an empty issuer would otherwise be a silent "check nothing").
        for field in ["issuer", "audience"] {
            var bad = plain
            if field == "issuer" { bad.issuer = "" } else { bad.audience = "" }
            XCTAssertThrowsError(try builder().build(name: "toto", settings: bad, previous: nil)) { error in
                XCTAssertTrue("\(error)".contains("\(field) must not be empty"), "\(error)")
            }
        }
    }

    func testShortHS256SecretRefusedWithTheFieldNamedAndNotTheSecret() throws {
        var settings = AppSettings()
        settings.authKeys = [.object(["alg": .string("HS256"), "secret": .string(String(longSecret.dropLast()))])]
        XCTAssertThrowsError(try builder().build(name: "toto", settings: settings, previous: nil)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.hasPrefix("authKeys[0]") && text.contains("shorter than 32 bytes"), text)
            XCTAssertFalse(text.contains(String(self.longSecret.dropLast())))
        }
        settings.authKeys = [.object(["alg": .string("HS256"), "secret": .string(longSecret)])]
        XCTAssertNotNil(try builder().build(name: "toto", settings: settings, previous: nil).verifier)
    }

    func testWarningForAsymmetricKeysWithoutIssuerAndAudience() throws {
        let pem = Self.rsaPublicKeyPEM
        let logs = LogCapture()
        let builder = AppProfileBuilder(httpClient: nil, fcm: .init(), logger: logs.logger)
        var settings = AppSettings()
        settings.authKeys = [.object(["alg": .string("RS256"), "publicKeyPEM": .string(pem)])]
        _ = try builder.build(name: "unbound", settings: settings, previous: nil)
        settings.issuer = "https://issuer.example"
        _ = try builder.build(name: "halfbound", settings: settings, previous: nil)
        settings.audience = "p1"
        _ = try builder.build(name: "bound", settings: settings, previous: nil)
        var hsOnly = AppSettings()
        hsOnly.authKeys = [.object(["alg": .string("HS256"), "secret": .string(longSecret)])]
        _ = try builder.build(name: "hsonly", settings: hsOnly, previous: nil)

        let warnings = logs.entries.filter { $0.level == .warning }
        XCTAssertEqual(warnings.map { $0.metadata["app"] }, ["unbound", "halfbound"])
        XCTAssertTrue(warnings[0].message.contains("without checking issuer and audience"), warnings[0].message)
        XCTAssertEqual(warnings[1].metadata["missing"], "audience")
    }

    // MARK: - Finding 6: parse errors name file, line and column, never the text

    private func decodeError(_ text: String) -> String {
        do {
            _ = try YAMLDecoder().decode(AppSettings.self, from: text)
            return "decoded"
        } catch {
            return SettingsFileError.describe(error, file: "apps.d/toto.yaml")
        }
    }

    func testSyntaxErrorsNameLineAndColumnNotTheText() {
        let cases: [(String, String)] = [
            // A second ':' in a plain scalar.
            ("enabled: true\nhms:\n  clientSecret: \(secret): oops\n", "apps.d/toto.yaml:3:"),
            // Bad indentation.
            ("hms:\n  appId: \"1\"\n clientSecret: \(secret)\n", "apps.d/toto.yaml:3:"),
            // An unterminated quoted scalar.
            ("hms:\n  clientSecret: \"\(secret)\n", "apps.d/toto.yaml:"),
            // JSON with a missing comma.
            ("{\"hms\": {\"appId\": \"1\",\n  \"clientSecret\": \"\(secret)\" \"x\"}}\n", "apps.d/toto.yaml:2:"),
            // An unclosed flow sequence.
            ("authKeys: [{alg: HS256, secret: \(secret)}\n", "apps.d/toto.yaml:"),
            // A tab where YAML forbids it, a control character (a reader error).
            ("hms:\n\tclientSecret: \(secret)\n", "apps.d/toto.yaml:2:"),
            ("hms: {clientSecret: \"\(secret)\u{1}\"}\n", "apps.d/toto.yaml:1:"),
            // Duplicate keys.
            ("hms: {clientSecret: \(secret), clientSecret: \(secret)x}\n", "apps.d/toto.yaml:1:"),
        ]
        for (text, prefix) in cases {
            let message = decodeError(text)
            XCTAssertTrue(message.hasPrefix(prefix), "\(message) for \(text.debugDescription)")
            XCTAssertFalse(message.contains(secret), message)
            XCTAssertFalse(message.contains("oops"), message)
        }
        // Yams' own description does quote the line (the finding): this is why it is never printed.
        do {
            _ = try YAMLDecoder().decode(AppSettings.self, from: cases[0].0)
        } catch {
            XCTAssertTrue("\(error)".contains(secret))
        }
    }

    func testDecodingErrorsNameTheField() {
        var message = decodeError("hms:\n  clientSecret: [\(secret)]\n")
        XCTAssertEqual(message, "apps.d/toto.yaml: hms.clientSecret: wrong type, expected a single value")
        message = decodeError("enabled: \(secret)\n")
        XCTAssertTrue(message.hasPrefix("apps.d/toto.yaml: enabled: "), message)
        XCTAssertFalse(message.contains(secret), message)
        message = decodeError("authKeys: {alg: HS256}\n")
        XCTAssertEqual(message, "apps.d/toto.yaml: authKeys: wrong type, expected a list")
        XCTAssertEqual(SettingsFileError.field([]), "(document)")
    }

    func testMainConfigurationParseErrorNeverQuotesTheFile() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pg-config-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("apps:\n  toto:\n    hms:\n      clientSecret: \(secret): oops\n".utf8).write(to: file)
        XCTAssertThrowsError(try GatewayConfiguration.load(file: file.path, environment: [:])) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("\(file.path):4:"), text)
            XCTAssertFalse(text.contains(self.secret), text)
        }
        // A value of the wrong kind in an enum (the standard library would quote it) is named, not quoted.
        try Data("kafka: {partitioner: \(secret)}\n".utf8).write(to: file)
        XCTAssertThrowsError(try GatewayConfiguration.load(file: file.path, environment: [:])) { error in
            XCTAssertEqual("\(error)", "invalid configuration file \(file.path): kafka.partitioner: invalid value")
        }
    }

    func testReloaderRefusesABrokenFileWithoutLoggingItsText() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pg-apps-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("toto.yaml")
        try Data("authKeys: [{alg: HS256, secret: \"\(longSecret)\"}]\n".utf8).write(to: file)
        var source = AppSettingsSource()
        source.directory = directory.path
        let logs = LogCapture()
        let profiles = AppProfiles()
        let reloader = AppSettingsReloader(
            inline: [:], source: source, profiles: profiles, builder: builder(), metrics: GatewayMetrics(), logger: logs.logger,
            onChange: { _ in })
        XCTAssertEqual(reloader.reload(), ["toto"])
        let good = try XCTUnwrap(profiles.profile("toto"))

        try Data("hms:\n  appId: \"1\"\n  clientSecret: \(secret): oops\n".utf8).write(to: file)
        XCTAssertEqual(reloader.reload(), [])
        XCTAssertTrue(profiles.profile("toto") === good, "the last good settings stay in force")
        let refused = try XCTUnwrap(logs.entries.first { $0.message.contains("app settings refused") })
        let error = try XCTUnwrap(refused.metadata["error"])
        XCTAssertTrue(error.hasPrefix("\(file.path):3:"), error)
        XCTAssertTrue(error.contains("mapping values are not allowed in this context"), error)
        XCTAssertFalse(logs.all.contains(secret), logs.all)
    }

    // MARK: - Finding 8: cleartext provider endpoints

    func testCleartextEndpointsRefusedUnlessAllowed() throws {
        for (key, variable) in [
            ("fcm.baseURL", "PUSH_FCM_BASE_URL"), ("fcm.tokenURL", "PUSH_FCM_TOKEN_URL"),
            ("hms.baseURL", "PUSH_HMS_BASE_URL"), ("hms.tokenURL", "PUSH_HMS_TOKEN_URL"),
        ] {
            let url = "http://user:\(secret)@127.0.0.1:9/x"
            XCTAssertThrowsError(try GatewayConfiguration.load(file: nil, environment: [variable: url])) { error in
                let text = "\(error)"
                XCTAssertTrue(text.hasPrefix("\(key) is a cleartext http:// URL"), text)
                XCTAssertTrue(text.contains("allowInsecureEndpoints: true"), text)
                XCTAssertFalse(text.contains(self.secret), "the URL is not quoted")
            }
            XCTAssertThrowsError(try GatewayConfiguration.load(file: nil, environment: [variable: "ftp://h/x"])) { error in
                XCTAssertEqual("\(error)", "\(key) must be an https:// URL")
            }
            XCTAssertNoThrow(try GatewayConfiguration.load(file: nil, environment: [variable: "https://h:1/x"]))
        }
        // The defaults are https.
        XCTAssertFalse(try GatewayConfiguration.load(file: nil, environment: [:]).allowInsecureEndpoints)

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pg-config-\(UUID().uuidString).yaml")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("allowInsecureEndpoints: true\nfcm: {baseURL: 'http://127.0.0.1:9', tokenURL: 'HTTP://127.0.0.1:9/t'}\nhms: {baseURL: 'http://127.0.0.1:9', tokenURL: 'http://127.0.0.1:9/t'}\n".utf8).write(to: file)
        let allowed = try GatewayConfiguration.load(file: file.path, environment: [:])
        XCTAssertTrue(allowed.allowInsecureEndpoints)
        XCTAssertEqual(allowed.fcm.baseURL, "http://127.0.0.1:9")
    }

    func testServiceAccountTokenURIMustBeHTTPS() throws {
        XCTAssertThrowsError(try GatewayConfiguration.checkEndpoint(
            "http://127.0.0.1:9/token", name: "the service account's token_uri", allowInsecure: false)) { error in
            XCTAssertTrue("\(error)".hasPrefix("the service account's token_uri is a cleartext http:// URL"), "\(error)")
        }
        XCTAssertNoThrow(try GatewayConfiguration.checkEndpoint("http://127.0.0.1:9/token", name: "x", allowInsecure: true))
        XCTAssertNoThrow(try GatewayConfiguration.checkEndpoint("https://oauth2.googleapis.com/token", name: "x", allowInsecure: false))
        for notAURL in ["https", "https:/x", "http", "", "//host/x", " https://x"] {
            XCTAssertThrowsError(try GatewayConfiguration.checkEndpoint(notAURL, name: "x", allowInsecure: true), notAURL)
        }
    }

    // MARK: - Helpers

    private func builder() -> AppProfileBuilder {
        AppProfileBuilder(httpClient: nil, fcm: .init(), logger: Logger(label: "test"))
    }

    /// A 2048-bit RSA public key (any will do: only its algorithm matters here).
    private static let rsaPublicKeyPEM = """
        -----BEGIN PUBLIC KEY-----
        MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAkaBQLTDjY5GgRVl7FT/F
        qESbn+z/QH8zurUPrf7r7cmeWVG/N69cCsToTqFOcE5mXA/HVcLZPmCb6totv+wl
        OJaTK4mClFvUwKDxOLV+R/5TfFut6DLgABHE3810cehN8WHzo6qZFhncHJNLnplh
        SmeSLbWTNAQZm+Lk7qsBcRdl11C7R6keXZKwRVJk7z1F6AuqeTMmTAELV1tcvMES
        K5pW6e7FHFHg23fEcTKbktNQoy0l0GPMWn7iFxAV7uS0N520ltvh290jD5BkoVEH
        t8dfYHTYNtsOr+jrBFDAD42CQRkAaaVXqcu1/hTktuiVDWdlEPVB7z8C+0G6J0h4
        ywIDAQAB
        -----END PUBLIC KEY-----

        """
}

/// Collects log entries (tests only).
final class LogCapture: Sendable {
    struct Entry: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    private let box = Mutex<[Entry]>([])

    var entries: [Entry] { box.withLock { $0 } }
    /// Every message and metadata value, as one text.
    var all: String { entries.map { "\($0.message) \($0.metadata)" }.joined(separator: "\n") }

    var logger: Logger {
        Logger(label: "capture") { _ in Handler(capture: self) }
    }

    fileprivate func append(_ entry: Entry) { box.withLock { $0.append(entry) } }

    private struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var merged: [String: String] = [:]
            for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) {
                merged[key] = "\(value)"
            }
            capture.append(Entry(level: event.level, message: "\(event.message)", metadata: merged))
        }
    }
}
