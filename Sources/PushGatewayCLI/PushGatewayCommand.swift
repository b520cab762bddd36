import ArgumentParser
import Foundation
import EventDecoding
import Gateway
import GatewayLogging
import KafkaClient
import Logging
import PushProto

@main
struct PushGatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-gateway",
        abstract: "Wakes mobile apps when data they subscribed to changes.",
        subcommands: [
            Run.self, Publish.self, PublishUserNotification.self, ValidateEventCommand.self, DemoTokenCommand.self, DecodeCommand.self,
            CheckCredentialsCommand.self,
        ],
        defaultSubcommand: Run.self)
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the gateway (embedded defaults without --config).")

    @Option(help: "YAML or JSON configuration file (default: $PUSH_GATEWAY_CONFIG, else embedded defaults).")
    var config: String?

    func run() async throws {
        let file = config ?? ProcessInfo.processInfo.environment["PUSH_GATEWAY_CONFIG"]
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(file: file)
        } catch {
            FileHandle.standardError.write(Data("push-gateway: \(error)\n".utf8))
            throw ExitCode(2)
        }
        let level = Logger.Level(rawValue: configuration.logging.level) ?? .info
        let json = configuration.logging.format == "json"
        LoggingSystem.bootstrap { label in
            if json { return JSONLogHandler(label: label, level: level) }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "push-gateway")
        do {
            try await GatewayApp(configuration: configuration, logger: logger).run()
        } catch {
            logger.critical("push-gateway failed", metadata: [LoggingKeys.error: "\(error)"])
            throw ExitCode(1)
        }
    }
}

struct Publish: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Publish one change event (for trying the gateway out).")

    @Option(help: "Bootstrap servers, host:port.") var brokers: String
    @Option(help: "Change topic.") var topic = "datasync.changes"
    @Option(help: "App id (also the record key).") var app: String
    @Option(help: "Path of the write.") var path: String
    @Option(help: "SET, MERGE, REMOVE, SNAPSHOT or NAMESPACE_DELETED (any case).") var op: String = "SET"
    @Option(help: "New value at the path, as JSON text.") var after: String?
    @Option(help: "Old value at the path, as JSON text.") var before: String?
    @Flag(help: "Publish protobuf's JSON mapping (content-type: application/json) instead of protobuf.") var json = false

    func run() async throws {
        guard let operation = Pushgateway_V1_Op(rawValue: ["SET": 1, "MERGE": 2, "REMOVE": 3, "SNAPSHOT": 4, "NAMESPACE_DELETED": 5][op.uppercased()] ?? 0),
            operation != .unspecified
        else { throw ValidationError("unknown op '\(op)'") }
        let value = try EventDecoder.encode(
            app: app, path: path, operation: operation, after: after, before: before, eventID: UUID().uuidString,
            timestampMs: Int64(Date().timeIntervalSince1970 * 1000), json: json)
        try await Self.send(value, app: app, topic: topic, brokers: brokers, json: json)
        print("published \(op) \(path) to \(topic) for app \(app)")
    }

    /// Produces one record keyed by the app id (with the JSON form's header when `json`), and waits for the broker.
    static func send(_ value: [UInt8], app: String, topic: String, brokers: String, json: Bool) async throws {
        var logger = Logger(label: "push-gateway-publish")
        logger.logLevel = .warning
        let producer = try KafkaProducer(
            properties: ["bootstrap.servers": brokers, "message.timeout.ms": "10000", "log_level": "3"], logger: logger)
        let headers = json ? [KafkaHeader(name: EventDecoder.contentTypeHeader, string: "application/json")] : []
        try await producer.send(KafkaRecord(topic: topic, key: Array(app.utf8), value: value, headers: headers))
        producer.close()
    }
}

struct PublishUserNotification: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish-user-notification",
        abstract: "Publish one message to every device of a user (the user-notifications topic; for trying the gateway out).")

    @Option(help: "Bootstrap servers, host:port.") var brokers: String
    @Option(help: "User-notifications topic.") var topic = "push.notifications"
    @Option(help: "App id (also the record key).") var app: String
    @Option(help: "The user to notify.") var uid: String
    @Option(help: "What the devices receive: a JSON object, as JSON text.") var data: String
    @Option(name: .customLong("collapse-key"), help: "Messages with the same key replace each other at the provider.")
    var collapseKey: String?
    @Option(name: .customLong("ttl"), help: "Seconds the provider keeps it for an offline device (0 to 2419200).")
    var ttlSeconds: Int64?
    @Flag(help: "Publish protobuf's JSON mapping (content-type: application/json) instead of protobuf.") var json = false

    func run() async throws {
        let value = try UserNotificationDecoder.encode(
            app: app, uid: uid, data: data, collapseKey: collapseKey, ttlSeconds: ttlSeconds, eventID: UUID().uuidString,
            timestampMs: Int64(Date().timeIntervalSince1970 * 1000), json: json)
        // Checked as the gateway will check it: a mistake is reported here rather than dead-lettered.
        do {
            _ = try UserNotificationDecoder.decode(
                value: value, contentType: json ? Array(EventDecoder.jsonContentType.utf8) : nil, key: Array(app.utf8))
        } catch {
            throw ValidationError("the gateway would dead-letter it: \(error.reason)")
        }
        try await Publish.send(value, app: app, topic: topic, brokers: brokers, json: json)
        print("published a message to the user \(uid) to \(topic) for app \(app)")
    }
}
