import Foundation
import KafkaClient
import Yams

/// The gateway's configuration (docs/CONFIGURATION.md). Every field has an embedded default, so an empty
/// configuration runs the gateway with an in-process broker and a console sink.
public struct GatewayConfiguration: Decodable, Sendable, Equatable {
    public struct HTTP: Codable, Sendable, Equatable {
        public var host = "127.0.0.1"
        public var port = 8080
    }

    public struct Kafka: Codable, Sendable, Equatable {
        /// Empty: start the embedded broker.
        public var brokers = ""
        public var groupId = "push-gateway"
        public var changesTopic = "datasync.changes"
        public var deadLetterTopic = "push.dlq"
        /// Compacted topic holding the subscriptions (the gateway's only state).
        public var stateTopic = "push.state"
        /// Where the gateway asks upstream for the current value of a node (SPEC §4).
        public var snapshotRequestsTopic = "push.snapshot-requests"
        /// Partitions of the embedded broker's topics.
        public var partitions = 4
        /// Loopback port of the embedded broker (used when `brokers` is empty), fixed so that commands written
        /// against it keep working after a restart; 0 picks a free port at each start.
        public var embeddedBrokerPort = 9092
        /// Extra librdkafka properties for every client.
        public var properties: [String: String] = [:]
        /// How publishers choose a partition from the app id (the record key): `consistent_random` (librdkafka,
        /// kcat) or `murmur2_random` (Java). The gateway uses it to know which replica owns an app.
        public var partitioner = KeyPartitioner.consistentRandom
        /// Records in flight (consumed, notifications not yet handed over) before consumption pauses.
        public var maxInFlightRecords = 5000
    }

    public struct FCM: Codable, Sendable, Equatable {
        public var baseURL = "https://fcm.googleapis.com"
        public var tokenURL = ""
        public var caFile = ""
        public var requestTimeoutMs = 10_000
        public var maxConnections = 2
        /// Requests in flight per provider project (one app's FCM project or HMS app); the rest wait.
        public var maxInFlightPerProject = 200
    }

    public struct HMS: Codable, Sendable, Equatable {
        public var baseURL = "https://push-api.cloud.huawei.com"
        public var tokenURL = "https://oauth-login.cloud.huawei.com/oauth2/v3/token"
        public var requestTimeoutMs = 10_000
    }

    public struct Subscriptions: Codable, Sendable, Equatable {
        /// How often expired subscriptions are revoked.
        public var expirySweepSeconds = 60
    }

    public struct Logging: Codable, Sendable, Equatable {
        public var format = "text"
        public var level = "info"
    }

    public var http = HTTP()
    public var kafka = Kafka()
    public var fcm = FCM()
    public var hms = HMS()
    public var subscriptions = Subscriptions()
    public var logging = Logging()
    /// Apps configured inline (more come from `appSettings.directory`).
    public var apps: [String: AppSettings] = [:]
    /// Per-app settings files, reloaded without a restart (docs/CONFIGURATION.md).
    public var appSettings = AppSettingsSource()

    public init() {}

    public var usesEmbeddedBroker: Bool { kafka.brokers.isEmpty }

    /// True when the built-in `demo` app (console sink, a published HS256 secret, no rules) is served: only
    /// with the embedded defaults (embedded broker, no settings directory, no inline apps). A production
    /// configuration never gets it.
    public private(set) var servesDemoApp = false

    /// Adds the `demo` app when the configuration is the embedded default (see ``servesDemoApp``).
    mutating func addDemoAppToEmbeddedDefaults() {
        guard usesEmbeddedBroker, appSettings.directory.isEmpty, apps.isEmpty else { return }
        apps = ["demo": .demo]
        servesDemoApp = true
    }

    /// Reads a YAML or JSON file (JSON is YAML), then applies environment overrides.
    public static func load(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> GatewayConfiguration {
        var configuration = GatewayConfiguration()
        if let file, !file.isEmpty {
            let text: String
            do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
                throw ConfigurationError("cannot read configuration file \(file): \(error.localizedDescription)")
            }
            do {
                configuration = try YAMLDecoder().decode(GatewayConfiguration.self, from: text)
            } catch {
                throw ConfigurationError("invalid configuration file \(file): \(error)")
            }
        }
        try configuration.applyEnvironment(environment)
        configuration.addDemoAppToEmbeddedDefaults()
        try configuration.validate()
        return configuration
    }

    mutating func applyEnvironment(_ environment: [String: String]) throws {
        func int(_ name: String) throws -> Int? {
            guard let text = environment[name], !text.isEmpty else { return nil }
            guard let value = Int(text) else { throw ConfigurationError("\(name) must be an integer, got '\(text)'") }
            return value
        }
        if let value = environment["PUSH_HTTP_HOST"], !value.isEmpty { http.host = value }
        if let value = try int("PUSH_HTTP_PORT") { http.port = value }
        if let value = environment["PUSH_KAFKA_BROKERS"] { kafka.brokers = value }
        if let value = try int("PUSH_KAFKA_EMBEDDED_BROKER_PORT") { kafka.embeddedBrokerPort = value }
        if let value = environment["PUSH_KAFKA_GROUP_ID"], !value.isEmpty { kafka.groupId = value }
        if let value = environment["PUSH_KAFKA_CHANGES_TOPIC"], !value.isEmpty { kafka.changesTopic = value }
        if let value = environment["PUSH_KAFKA_DLQ_TOPIC"], !value.isEmpty { kafka.deadLetterTopic = value }
        if let value = environment["PUSH_KAFKA_STATE_TOPIC"], !value.isEmpty { kafka.stateTopic = value }
        if let value = environment["PUSH_KAFKA_SNAPSHOT_REQUESTS_TOPIC"], !value.isEmpty { kafka.snapshotRequestsTopic = value }
        if let value = environment["PUSH_FCM_BASE_URL"], !value.isEmpty { fcm.baseURL = value }
        if let value = environment["PUSH_FCM_TOKEN_URL"] { fcm.tokenURL = value }
        if let value = environment["PUSH_HMS_BASE_URL"], !value.isEmpty { hms.baseURL = value }
        if let value = environment["PUSH_HMS_TOKEN_URL"], !value.isEmpty { hms.tokenURL = value }
        if let value = environment["PUSH_LOG_FORMAT"], !value.isEmpty { logging.format = value }
        if let value = environment["PUSH_LOG_LEVEL"], !value.isEmpty { logging.level = value }
        if let value = environment["PUSH_APP_SETTINGS_DIR"] { appSettings.directory = value }
    }

    func validate() throws {
        guard (0...65535).contains(http.port) else { throw ConfigurationError("http.port must be 0...65535") }
        guard ["text", "json"].contains(logging.format) else { throw ConfigurationError("logging.format must be text or json") }
        guard (0...65535).contains(kafka.embeddedBrokerPort) else { throw ConfigurationError("kafka.embeddedBrokerPort must be 0...65535") }
        guard kafka.partitions > 0 else { throw ConfigurationError("kafka.partitions must be positive") }
        guard subscriptions.expirySweepSeconds > 0 else { throw ConfigurationError("subscriptions.expirySweepSeconds must be positive") }
        guard appSettings.reloadSeconds > 0 else { throw ConfigurationError("appSettings.reloadSeconds must be positive") }
        guard fcm.maxInFlightPerProject > 0 else { throw ConfigurationError("fcm.maxInFlightPerProject must be positive") }
        guard kafka.maxInFlightRecords > 0 else { throw ConfigurationError("kafka.maxInFlightRecords must be positive") }
        for (name, app) in apps {
            guard !name.isEmpty else { throw ConfigurationError("an app has an empty name") }
            do { try app.validate() } catch { throw ConfigurationError("apps.\(name): \(error.description)") }
        }
    }
}

public struct ConfigurationError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

// Decoding with defaults for absent keys: Codable's synthesised init requires every key, so each section
// decodes field by field, keeping the default when a key is missing.
extension GatewayConfiguration {
    enum CodingKeys: String, CodingKey { case http, kafka, fcm, hms, subscriptions, logging, apps, appSettings }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        http = try c.decodeIfPresent(HTTP.self, forKey: .http) ?? HTTP()
        kafka = try c.decodeIfPresent(Kafka.self, forKey: .kafka) ?? Kafka()
        fcm = try c.decodeIfPresent(FCM.self, forKey: .fcm) ?? FCM()
        hms = try c.decodeIfPresent(HMS.self, forKey: .hms) ?? HMS()
        subscriptions = try c.decodeIfPresent(Subscriptions.self, forKey: .subscriptions) ?? Subscriptions()
        logging = try c.decodeIfPresent(Logging.self, forKey: .logging) ?? Logging()
        apps = try c.decodeIfPresent([String: AppSettings].self, forKey: .apps) ?? [:]
        appSettings = try c.decodeIfPresent(AppSettingsSource.self, forKey: .appSettings) ?? AppSettingsSource()
    }
}

extension GatewayConfiguration.HTTP {
    enum CodingKeys: String, CodingKey { case host, port }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        host = try c.decodeIfPresent(String.self, forKey: .host) ?? host
        port = try c.decodeIfPresent(Int.self, forKey: .port) ?? port
    }
}

extension GatewayConfiguration.Kafka {
    enum CodingKeys: String, CodingKey { case brokers, groupId, changesTopic, deadLetterTopic, stateTopic, snapshotRequestsTopic, partitioner, partitions, embeddedBrokerPort, properties, maxInFlightRecords }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        brokers = try c.decodeIfPresent(String.self, forKey: .brokers) ?? brokers
        groupId = try c.decodeIfPresent(String.self, forKey: .groupId) ?? groupId
        changesTopic = try c.decodeIfPresent(String.self, forKey: .changesTopic) ?? changesTopic
        deadLetterTopic = try c.decodeIfPresent(String.self, forKey: .deadLetterTopic) ?? deadLetterTopic
        stateTopic = try c.decodeIfPresent(String.self, forKey: .stateTopic) ?? stateTopic
        snapshotRequestsTopic = try c.decodeIfPresent(String.self, forKey: .snapshotRequestsTopic) ?? snapshotRequestsTopic
        partitioner = try c.decodeIfPresent(KeyPartitioner.self, forKey: .partitioner) ?? partitioner
        partitions = try c.decodeIfPresent(Int.self, forKey: .partitions) ?? partitions
        embeddedBrokerPort = try c.decodeIfPresent(Int.self, forKey: .embeddedBrokerPort) ?? embeddedBrokerPort
        properties = try c.decodeIfPresent([String: String].self, forKey: .properties) ?? properties
        maxInFlightRecords = try c.decodeIfPresent(Int.self, forKey: .maxInFlightRecords) ?? maxInFlightRecords
    }
}

extension GatewayConfiguration.FCM {
    enum CodingKeys: String, CodingKey { case baseURL, tokenURL, caFile, requestTimeoutMs, maxConnections, maxInFlightPerProject }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        baseURL = try c.decodeIfPresent(String.self, forKey: .baseURL) ?? baseURL
        tokenURL = try c.decodeIfPresent(String.self, forKey: .tokenURL) ?? tokenURL
        caFile = try c.decodeIfPresent(String.self, forKey: .caFile) ?? caFile
        requestTimeoutMs = try c.decodeIfPresent(Int.self, forKey: .requestTimeoutMs) ?? requestTimeoutMs
        maxConnections = try c.decodeIfPresent(Int.self, forKey: .maxConnections) ?? maxConnections
        maxInFlightPerProject = try c.decodeIfPresent(Int.self, forKey: .maxInFlightPerProject) ?? maxInFlightPerProject
    }
}

extension GatewayConfiguration.HMS {
    enum CodingKeys: String, CodingKey { case baseURL, tokenURL, requestTimeoutMs }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        baseURL = try c.decodeIfPresent(String.self, forKey: .baseURL) ?? baseURL
        tokenURL = try c.decodeIfPresent(String.self, forKey: .tokenURL) ?? tokenURL
        requestTimeoutMs = try c.decodeIfPresent(Int.self, forKey: .requestTimeoutMs) ?? requestTimeoutMs
    }
}

extension GatewayConfiguration.Subscriptions {
    enum CodingKeys: String, CodingKey { case expirySweepSeconds }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        expirySweepSeconds = try c.decodeIfPresent(Int.self, forKey: .expirySweepSeconds) ?? expirySweepSeconds
    }
}

extension GatewayConfiguration.Logging {
    enum CodingKeys: String, CodingKey { case format, level }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        format = try c.decodeIfPresent(String.self, forKey: .format) ?? format
        level = try c.decodeIfPresent(String.self, forKey: .level) ?? level
    }
}
