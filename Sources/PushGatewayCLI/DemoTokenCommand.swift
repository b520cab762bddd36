import ArgumentParser
import Gateway
import GatewayEmbedded

/// `push-gateway demo-token`: an auth token of the built-in `demo` app (embedded defaults) for any uid and
/// lifetime, for trying the v2 API.
struct DemoTokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-token",
        abstract: "Print a v2 auth token of the built-in demo app (embedded defaults only) for a uid and lifetime",
        discussion: """
            The token is an HS256 JWT signed with the demo app's published secret, so it is good for the embedded \
            defaults only: a configured gateway never serves the demo app. Use it as 'Authorization: Bearer TOKEN' \
            on /datasync/v2/demo/subscriptions/UID.
            """)

    @Option(help: "The user id (the token's uid claim).") var uid = "demo-user"

    @Option(help: "How long the token is valid: seconds, or a number with s, m, h or d (90m, 24h, 7d).")
    var lifetime = "24h"

    func run() throws {
        guard !uid.isEmpty else { throw ValidationError("--uid must not be empty") }
        guard let seconds = DemoToken.lifetimeSeconds(lifetime), seconds <= 366 * 86_400 else {
            throw ValidationError("--lifetime must be a positive number of seconds, or of s, m, h or d, at most 366d (got '\(lifetime)')")
        }
        print(try DemoToken.mint(uid: uid, lifetimeSeconds: seconds))
    }
}
