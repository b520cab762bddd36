import ArgumentParser
import Foundation
import Gateway
import Logging

struct CheckCredentialsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-credentials",
        abstract: "Check an app's settings and its FCM, HMS, APNs and Web Push credentials (nothing is delivered)",
        discussion: """
            Reads the configuration as `run` does (--config or $PUSH_GATEWAY_CONFIG, then PUSH_* variables), compiles \
            the app's settings, fetches an OAuth access token from each provider the app uses, and sends one dry-run \
            message: FCM `validate_only`, HMS `validate_only: true`. Without --fcm-token / --hms-token the dry run \
            addresses a placeholder device token, which the provider refuses after accepting our credentials. \
            APNs: a provider token signed with the .p8 key and one background push to a placeholder device token, \
            which APNs refuses (BadDeviceToken) after accepting the token and the bundle id. Web Push: the VAPID key \
            signs a token that verifies with its public half, printed as the applicationServerKey. \
            Exit status: 0 when every check passed, 1 when one failed, 2 when the configuration cannot be read.
            """)

    @Argument(help: "The app id.")
    var app: String

    @Option(help: "YAML or JSON configuration file (default: $PUSH_GATEWAY_CONFIG, else embedded defaults).")
    var config: String?

    @Option(help: "An FCM registration token for the dry run (default: a placeholder).")
    var fcmToken: String?

    @Option(help: "An HMS push token for the dry run (default: a placeholder).")
    var hmsToken: String?

    func run() async throws {
        let file = config ?? ProcessInfo.processInfo.environment["PUSH_GATEWAY_CONFIG"]
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(file: file)
        } catch {
            FileHandle.standardError.write(Data("push-gateway check-credentials: \(error)\n".utf8))
            throw ExitCode(2)
        }
        var logger = Logger(label: "push-gateway-check-credentials")
        logger.logLevel = .critical
        let findings = await CredentialsCheck(configuration: configuration, logger: logger)
            .run(app: app, fcmToken: fcmToken, hmsToken: hmsToken)
        print("check-credentials \(app)")
        for finding in findings { print("  \(finding)") }
        let failed = findings.filter { $0.status == .failed }.count
        print(failed == 0 ? "all checks passed" : "\(failed) check(s) failed")
        if failed > 0 { throw ExitCode(1) }
    }
}
