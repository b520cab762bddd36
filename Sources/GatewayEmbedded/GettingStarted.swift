import Foundation

/// The newcomer's banner, printed once the API listens with the embedded defaults: how to subscribe, publish
/// and look at dead letters, with commands that work from any directory (absolute path of this binary) and
/// keep working after a restart (the embedded broker's port is fixed, `kafka.embeddedBrokerPort`).
public enum GettingStarted {
    public struct Setup {
        var host: String
        var port: Int
        var app: String
        var brokers: String
        var changesTopic: String
        var deadLetterTopic: String

        public init(host: String, port: Int, app: String, brokers: String, changesTopic: String, deadLetterTopic: String) {
            self.host = host
            self.port = port
            self.app = app
            self.brokers = brokers
            self.changesTopic = changesTopic
            self.deadLetterTopic = deadLetterTopic
        }
    }

    public static func print(_ setup: Setup) {
        FileHandle.standardError.write(Data(text(setup, binary: shellQuoted(executablePath())).utf8))
    }

    static func text(_ setup: Setup, binary: String) -> String {
        let host = setup.host
        let port = setup.port
        let app = setup.app
        let brokers = setup.brokers
        let token = (try? DemoToken.mint(uid: "demo-user", lifetimeSeconds: 24 * 3600)) ?? "<run: \(binary) demo-token>"
        let v2 =
            app == "demo"
            ? """
                Or with the v2 API (a token of user demo-user, valid 24 h; `\(binary) demo-token --uid alice --lifetime 7d` mints others):
                curl -i -X POST 'http://\(host):\(port)/datasync/v2/demo/subscriptions/demo-user' \\
                  -H 'Authorization: Bearer \(token)' \\
                  -d '{"kind":"mobile","mode":"childEvent","path":"/chat","context":"my-device-token"}'

            """ : ""
        return """

            ───────────────────────────────────────────────────────────────────────────────
             push-gateway is running with embedded defaults: an in-process broker on \(brokers), a console sink.
             Nothing is stored on disk: a restart starts with no subscriptions and empty topics.
             1. Subscribe a device to /chat in value mode:
                curl -i -X PUT 'http://\(host):\(port)/base/\(app)/.wakeup/chat?id=my-device-token&mode=value'
            \(v2) 2. Publish writes (with the bundled command, or kcat and the JSON form of the event):
                \(binary) publish --brokers \(brokers) --app \(app) --path /chat --op SET --after '{"m1":"hi"}'
                echo '{"appId":"\(app)","path":"/chat/m2","op":"set","after":{"text":"hello"}}' | \\
                  kcat -P -b \(brokers) -t \(setup.changesTopic) -k \(app) -H content-type=application/json
             3. The notification is printed here as a {"sink":"console",...} line.
             Check an event first: \(binary) validate-event '{"appId":"\(app)","path":"/chat","op":"set","after":1}'
             Rejected events, with their reason: kcat -C -b \(brokers) -t \(setup.deadLetterTopic) -e -f '%h\\n%s\\n'
             How to publish: docs/PUBLISHING.md
            ───────────────────────────────────────────────────────────────────────────────

            """
    }

    /// This binary's absolute path, so the banner's commands work from any directory.
    static func executablePath() -> String {
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return path }
        let argument = CommandLine.arguments.first ?? "push-gateway"
        guard !argument.hasPrefix("/") else { return argument }
        return URL(fileURLWithPath: argument, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
            .standardizedFileURL.path
    }

    /// `text` as one shell word.
    static func shellQuoted(_ text: String) -> String {
        let plain = text.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "/._-+:@%,=".unicodeScalars.contains($0) }
        return plain && !text.isEmpty ? text : "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
    }
}
