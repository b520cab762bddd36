import Foundation
import GatewayAPI
import KafkaClient
import Yams

/// The gateway's configuration (docs/CONFIGURATION.md). Every field has an embedded default, so an empty
/// configuration runs the gateway with an in-process broker and a console sink.
public struct GatewayConfiguration: Decodable, Sendable, Equatable {
    public struct HTTP: Codable, Sendable, Equatable {
        public var host = "127.0.0.1"
        public var port = 8080
        /// Where the other replicas reach this one's API (`http://10.0.0.5:8080`): calls for apps this replica
        /// owns are forwarded there. Empty: `http://<host>:<port>` (with the machine's host name when `host` is
        /// a wildcard address).
        public var advertisedAddress = ""
        /// The bound of a call for an app another replica owns: waiting for its partition to have a ready owner
        /// (a rebalance), forwarding it and the owner's answer. Past it: `503` (no owner) or `504` (the owner did
        /// not answer a write: its outcome is unknown).
        public var ownerWaitMs = 10_000
        /// Time allowed to a call forwarded to the owner.
        public var forwardTimeoutMs = 10_000
        /// Time allowed to an API write to be stored: the producer's `message.timeout.ms` (unless
        /// `kafka.properties` sets it), so a write is confirmed or failed within it, never later.
        public var writeTimeoutMs = 5000

        /// A connection with no request in progress for this long is closed (keep-alive connections from
        /// clients and from the other replicas included). Longer than the keep-alive of the proxies in front
        /// (ingress-nginx keeps upstream connections 60 s), so that they, not the gateway, close idle ones.
        public var idleTimeoutMs = 75_000
        /// A request (head and body) must be received whole within this from its first byte, else the
        /// connection gets `408` and is closed: a slow-loris holds a connection for this long at most.
        public var readTimeoutMs = 10_000
        /// Proxies (CIDRs, IPv4 and IPv6) whose `X-Forwarded-For` is believed: the client's address is then
        /// the right-most address of the header that is not itself a trusted proxy. Empty: the connection's
        /// peer is the client.
        public var trustedProxies: [String] = []
    }

    /// Partition-owned state (docs/ARCHITECTURE.md).
    public struct State: Codable, Sendable, Equatable {
        /// Standby copies of each partition kept by other replicas, warm for a takeover. Each costs one more
        /// copy of the partition's memory; 0 (the default) means a takeover reads the partition from the log.
        public var standbyReplicas = 0

        /// The estimated bytes of state one partition may hold (``StateBudget``): creates beyond it are
        /// refused (429). 0: no budget. A partition is loaded whole by one replica at a takeover, so keep it
        /// under the replica's mark divided by the partitions a replica holds after losing a peer.
        public var maxPartitionBytes = 512 * 1024 * 1024
        /// The replica-wide high-water mark of estimated state bytes (owned and standby partitions): creates
        /// beyond it are refused (507). Nil: 60 % of the container's memory limit when there is one, else
        /// none; 0: none.
        public var maxReplicaBytes: Int?

        /// The mark in force: ``maxReplicaBytes``, or its default from the container's memory limit.
        public var effectiveMaxReplicaBytes: Int { maxReplicaBytes ?? StateBudget.defaultReplicaMark() }
    }

    /// The operators' endpoints (`/admin/apps`): closed unless a token is configured.
    public struct Admin: Codable, Sendable, Equatable {
        /// A file holding the admin bearer token (a mounted Secret); read at start.
        public var tokenFile = ""
        /// The token itself (prefer `tokenFile`, or `PUSH_ADMIN_TOKEN`).
        public var token = ""

        /// The token to require, nil when the admin endpoints are disabled.
        public func resolvedToken() throws -> String? {
            if !tokenFile.isEmpty {
                do {
                    let text = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
                    guard text.utf8.count >= 16 else { throw ConfigurationError("admin.tokenFile: the token must be at least 16 bytes") }
                    return text
                } catch let error as ConfigurationError {
                    throw error
                } catch {
                    throw ConfigurationError("admin.tokenFile \(tokenFile): cannot read it")
                }
            }
            guard !token.isEmpty else { return nil }
            guard token.utf8.count >= 16 else { throw ConfigurationError("admin.token must be at least 16 bytes") }
            return token
        }
    }

    /// What the replicas share: the secret that signs calls forwarded between them and their members records
    /// (docs/SECURITY.md, "The hop between replicas"). Needed as soon as there is more than one replica.
    public struct Cluster: Codable, Sendable, Equatable {
        /// A file holding the secret (a mounted Secret); read at start. At least 32 bytes.
        public var secretFile = ""
        /// The secret itself (prefer `secretFile`, or `PUSH_CLUSTER_SECRET`).
        public var secret = ""

        /// The key, nil when no secret is configured (a lone replica). The file may hold several secrets, one per
        /// line: the first signs, each verifies (a rotation).
        func resolvedKey() throws -> ClusterKey? {
            var secrets = secret.isEmpty ? [] : [secret]
            if !secretFile.isEmpty {
                do {
                    secrets = try String(contentsOfFile: secretFile, encoding: .utf8).split(whereSeparator: \.isNewline)
                        .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
                } catch {
                    throw ConfigurationError("cluster.secretFile \(secretFile): cannot read it")
                }
            }
            guard !secrets.isEmpty else { return nil }
            guard secrets.allSatisfy({ $0.utf8.count >= ClusterKey.minimumBytes }) else {
                throw ConfigurationError("a cluster secret must be at least \(ClusterKey.minimumBytes) bytes (e.g. openssl rand -base64 48)")
            }
            return ClusterKey(secrets: secrets.map { Array($0.utf8) })
        }
    }

    /// Graceful shutdown (SIGTERM).
    public struct Shutdown: Codable, Sendable, Equatable {
        /// At most this long for records in flight to finish (before a revoke, and at shutdown); unfinished
        /// ones stay uncommitted and are consumed again (at-least-once). Keep it below the pod's
        /// `terminationGracePeriodSeconds`.
        public var drainSeconds = 15.0
    }

    public struct Kafka: Codable, Sendable, Equatable {
        /// Empty: start the embedded broker.
        public var brokers = ""
        public var groupId = "push-gateway"
        public var changesTopic = "datasync.changes"
        public var deadLetterTopic = "push.dlq"
        /// Messages addressed to a user (proto/pushgateway/v1/user_notification.proto), key = app id, with the change
        /// topic's partition count: partition p is read by the owner of change partition p.
        public var userNotificationsTopic = "push.notifications"
        /// Compacted topic holding the subscriptions (the gateway's only state).
        public var stateTopic = "push.state"
        /// Where the gateway asks upstream for the current value of a node (SPEC §4).
        public var snapshotRequestsTopic = "push.snapshot-requests"
        /// Compacted, one partition: the replicas' records of which partitions each owns and where its API
        /// answers (request forwarding, standby placement).
        public var membersTopic = "push.members"
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
        /// Records in flight of one change partition (with its user-notifications partition) before that partition
        /// alone pauses, until they drain to half. 0: derived from `maxInFlightRecords` (``InFlightShare/derived(maxInFlight:floor:)``).
        public var maxInFlightRecordsPerPartition = 0
        /// Threads that match change records, each partition always on the same one (so in order), partitions
        /// spread over them. 0 (the default): one per core (Benchmarks/README.md, "Matching on every core").
        public var workers = 0
        /// A start that cannot read the topics' metadata within this bound fails (non-zero exit, the cause on
        /// one line).
        public var startupTimeoutSeconds = 30
    }

    public struct FCM: Codable, Sendable, Equatable {
        public var baseURL = "https://fcm.googleapis.com"
        public var tokenURL = ""
        public var caFile = ""
        public var requestTimeoutMs = 10_000
        public var maxConnections = 2
        /// Concurrent streams per HTTP/2 connection (the server's `SETTINGS_MAX_CONCURRENT_STREAMS` also applies;
        /// FCM's is 100). The providers' HTTP client hands libcurl at most `maxConnections` × this many requests.
        public var maxStreamsPerConnection = 100
        /// Requests in flight per provider project (one app's FCM project or HMS app); the rest wait.
        public var maxInFlightPerProject = 200
    }

    public struct HMS: Codable, Sendable, Equatable {
        public var baseURL = "https://push-api.cloud.huawei.com"
        public var tokenURL = "https://oauth-login.cloud.huawei.com/oauth2/v3/token"
        public var requestTimeoutMs = 10_000
    }

    /// Apple's push service (`kind: "apns"` subscriptions; each app's team, key and bundle id are in its settings).
    public struct APNs: Codable, Sendable, Equatable {
        /// Where apps with `environment: production` send.
        public var baseURL = "https://api.push.apple.com"
        /// Where apps with `environment: development` send (builds signed for development).
        public var developmentBaseURL = "https://api.sandbox.push.apple.com"
        /// A PEM file of CA certificates to trust for APNs instead of the system store (tests with a fake).
        public var caFile = ""
        public var requestTimeoutMs = 10_000
    }

    /// The delivery path (docs/DELIVERY.md).
    public struct Delivery: Codable, Sendable, Equatable {
        /// Delivery lanes: each has its own queue, lock and send loop; a subscription, and every notification of one
        /// provider project (or of one app's webhooks), is always in the same lane. 0 (the default): one per core.
        public var lanes = 0

        /// The number of lanes in force: ``lanes``, or the cores when 0.
        public var effectiveLanes: Int { lanes > 0 ? lanes : max(1, ProcessInfo.processInfo.activeProcessorCount) }
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
    public var apns = APNs()
    public var delivery = Delivery()
    public var subscriptions = Subscriptions()
    public var state = State()
    public var shutdown = Shutdown()
    public var admin = Admin()
    public var cluster = Cluster()
    public var logging = Logging()
    /// Apps configured inline (more come from `appSettings.directory`).
    public var apps: [String: AppSettings] = [:]
    /// Per-app settings files, reloaded without a restart (docs/CONFIGURATION.md).
    public var appSettings = AppSettingsSource()
    /// Accept cleartext `http://` provider endpoints (FCM and HMS base and token URLs, a service account's
    /// `token_uri`). They carry client secrets and access tokens, so they are refused unless this is set, as
    /// tests with local fake providers do; the gateway warns at start when it is.
    public var allowInsecureEndpoints = false

    public init() {}

    public var usesEmbeddedBroker: Bool { kafka.brokers.isEmpty }

    /// Where the other replicas reach this one (``HTTP/advertisedAddress``, or derived from host and port).
    public var advertisedAddress: String {
        if !http.advertisedAddress.isEmpty { return http.advertisedAddress }
        let host = ["0.0.0.0", "::", ""].contains(http.host) ? ProcessInfo.processInfo.hostName : http.host
        return "http://\(host.contains(":") ? "[\(host)]" : host):\(http.port)"
    }

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
                // Never the error's own text: Yams quotes the offending line, which may hold a secret.
                throw ConfigurationError("invalid configuration file \(SettingsFileError.describe(error, file: file))")
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
        if let value = try int("PUSH_KAFKA_WORKERS") { kafka.workers = value }
        if let value = try int("PUSH_DELIVERY_LANES") { delivery.lanes = value }
        if let value = environment["PUSH_KAFKA_GROUP_ID"], !value.isEmpty { kafka.groupId = value }
        if let value = environment["PUSH_KAFKA_CHANGES_TOPIC"], !value.isEmpty { kafka.changesTopic = value }
        if let value = environment["PUSH_KAFKA_DLQ_TOPIC"], !value.isEmpty { kafka.deadLetterTopic = value }
        if let value = environment["PUSH_KAFKA_USER_NOTIFICATIONS_TOPIC"], !value.isEmpty { kafka.userNotificationsTopic = value }
        if let value = environment["PUSH_KAFKA_STATE_TOPIC"], !value.isEmpty { kafka.stateTopic = value }
        if let value = environment["PUSH_KAFKA_SNAPSHOT_REQUESTS_TOPIC"], !value.isEmpty { kafka.snapshotRequestsTopic = value }
        if let value = environment["PUSH_KAFKA_MEMBERS_TOPIC"], !value.isEmpty { kafka.membersTopic = value }
        if let value = environment["PUSH_HTTP_ADVERTISED_ADDRESS"], !value.isEmpty { http.advertisedAddress = value }
        if let value = try int("PUSH_STATE_STANDBY_REPLICAS") { state.standbyReplicas = value }
        if let value = try int("PUSH_STATE_MAX_REPLICA_BYTES") { state.maxReplicaBytes = value }
        if let value = try int("PUSH_HTTP_IDLE_TIMEOUT_MS") { http.idleTimeoutMs = value }
        if let value = try int("PUSH_HTTP_READ_TIMEOUT_MS") { http.readTimeoutMs = value }
        if let value = environment["PUSH_HTTP_TRUSTED_PROXIES"] {
            http.trustedProxies = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        if let value = environment["PUSH_ADMIN_TOKEN"], !value.isEmpty { admin.token = value }
        if let value = environment["PUSH_ADMIN_TOKEN_FILE"], !value.isEmpty { admin.tokenFile = value }
        if let value = environment["PUSH_CLUSTER_SECRET"], !value.isEmpty { cluster.secret = value }
        if let value = environment["PUSH_CLUSTER_SECRET_FILE"], !value.isEmpty { cluster.secretFile = value }
        if let value = environment["PUSH_FCM_BASE_URL"], !value.isEmpty { fcm.baseURL = value }
        if let value = environment["PUSH_FCM_TOKEN_URL"] { fcm.tokenURL = value }
        if let value = environment["PUSH_HMS_BASE_URL"], !value.isEmpty { hms.baseURL = value }
        if let value = environment["PUSH_HMS_TOKEN_URL"], !value.isEmpty { hms.tokenURL = value }
        if let value = environment["PUSH_APNS_BASE_URL"], !value.isEmpty { apns.baseURL = value }
        if let value = environment["PUSH_APNS_DEVELOPMENT_BASE_URL"], !value.isEmpty { apns.developmentBaseURL = value }
        if let value = environment["PUSH_LOG_FORMAT"], !value.isEmpty { logging.format = value }
        if let value = environment["PUSH_LOG_LEVEL"], !value.isEmpty { logging.level = value }
        if let value = environment["PUSH_APP_SETTINGS_DIR"] { appSettings.directory = value }
        // SASL credentials from a Kubernetes Secret (env valueFrom.secretKeyRef), not in the configuration file.
        if let value = environment["PUSH_KAFKA_SASL_USERNAME"], !value.isEmpty { kafka.properties["sasl.username"] = value }
        if let value = environment["PUSH_KAFKA_SASL_PASSWORD"], !value.isEmpty { kafka.properties["sasl.password"] = value }
    }

    func validate() throws {
        guard (0...65535).contains(http.port) else { throw ConfigurationError("http.port must be 0...65535") }
        guard ["text", "json"].contains(logging.format) else { throw ConfigurationError("logging.format must be text or json") }
        guard (0...65535).contains(kafka.embeddedBrokerPort) else { throw ConfigurationError("kafka.embeddedBrokerPort must be 0...65535") }
        guard kafka.partitions > 0 else { throw ConfigurationError("kafka.partitions must be positive") }
        guard subscriptions.expirySweepSeconds > 0 else { throw ConfigurationError("subscriptions.expirySweepSeconds must be positive") }
        guard appSettings.reloadSeconds > 0 else { throw ConfigurationError("appSettings.reloadSeconds must be positive") }
        guard (1...64).contains(fcm.maxConnections) else { throw ConfigurationError("fcm.maxConnections must be 1 to 64") }
        guard (1...1000).contains(fcm.maxStreamsPerConnection) else {
            throw ConfigurationError("fcm.maxStreamsPerConnection must be 1 to 1000")
        }
        guard fcm.maxInFlightPerProject > 0 else { throw ConfigurationError("fcm.maxInFlightPerProject must be positive") }
        guard (1...600_000).contains(apns.requestTimeoutMs) else { throw ConfigurationError("apns.requestTimeoutMs must be 1 to 600000") }
        guard kafka.maxInFlightRecords > 0 else { throw ConfigurationError("kafka.maxInFlightRecords must be positive") }
        guard (0...kafka.maxInFlightRecords).contains(kafka.maxInFlightRecordsPerPartition) else {
            throw ConfigurationError("kafka.maxInFlightRecordsPerPartition must be 0 (derived) to kafka.maxInFlightRecords")
        }
        guard (0...64).contains(kafka.workers) else { throw ConfigurationError("kafka.workers must be 0 (one per core) to 64") }
        guard (0...64).contains(delivery.lanes) else { throw ConfigurationError("delivery.lanes must be 0 (one per core) to 64") }
        guard state.standbyReplicas >= 0 else { throw ConfigurationError("state.standbyReplicas must be 0 or more") }
        guard http.writeTimeoutMs > 0, kafka.startupTimeoutSeconds > 0 else {
            throw ConfigurationError("http.writeTimeoutMs and kafka.startupTimeoutSeconds must be positive")
        }
        guard http.ownerWaitMs >= 0, http.forwardTimeoutMs > 0 else {
            throw ConfigurationError("http.ownerWaitMs must be 0 or more and http.forwardTimeoutMs positive")
        }
        guard shutdown.drainSeconds >= 0 else { throw ConfigurationError("shutdown.drainSeconds must be 0 or more") }
        // At most a day: the server's timers count nanoseconds in 64 bits, and a longer bound protects nothing.
        for (name, value) in [("http.idleTimeoutMs", http.idleTimeoutMs), ("http.readTimeoutMs", http.readTimeoutMs)] {
            guard value > 0, value <= 86_400_000 else { throw ConfigurationError("\(name) must be 1...86400000 (ms)") }
        }
        guard state.maxPartitionBytes >= 0, (state.maxReplicaBytes ?? 0) >= 0 else {
            throw ConfigurationError("state.maxPartitionBytes and state.maxReplicaBytes must be 0 (none) or more")
        }
        do {
            _ = try TrustedProxies(http.trustedProxies)
        } catch {
            throw ConfigurationError("http.trustedProxies: \(error.message)")
        }
        if !http.advertisedAddress.isEmpty, MemberAddress.validated(http.advertisedAddress) == nil {
            throw ConfigurationError(
                "http.advertisedAddress must be an http:// or https:// URL of a host and a port and nothing else, e.g. http://10.0.0.5:8080")
        }
        guard shutdown.drainSeconds.isFinite, shutdown.drainSeconds <= 3600 else {
            throw ConfigurationError("shutdown.drainSeconds must be a number of seconds up to 3600")
        }
        guard http.ownerWaitMs <= 600_000, http.forwardTimeoutMs <= 600_000, http.writeTimeoutMs <= 600_000 else {
            throw ConfigurationError("http.ownerWaitMs, http.forwardTimeoutMs and http.writeTimeoutMs must be at most 600000")
        }
        // A cluster secret that cannot be used fails the start, not the first forwarded call.
        _ = try cluster.resolvedKey()
        try validateEndpoints()
        for (name, app) in apps {
            guard !name.isEmpty else { throw ConfigurationError("an app has an empty name") }
            do { try app.validate() } catch { throw ConfigurationError("apps.\(name): \(error.description)") }
        }
    }
}

extension GatewayConfiguration {
    /// The provider endpoints must be `https://` URLs (`http://` too with ``allowInsecureEndpoints``). The
    /// messages name the setting, not the URL (which may hold credentials).
    func validateEndpoints() throws(ConfigurationError) {
        let endpoints = [
            ("fcm.baseURL", fcm.baseURL), ("fcm.tokenURL", fcm.tokenURL), ("hms.baseURL", hms.baseURL),
            ("hms.tokenURL", hms.tokenURL), ("apns.baseURL", apns.baseURL), ("apns.developmentBaseURL", apns.developmentBaseURL),
        ]
        for (name, url) in endpoints where !url.isEmpty {
            try Self.checkEndpoint(url, name: name, allowInsecure: allowInsecureEndpoints)
        }
    }

    static func checkEndpoint(_ url: String, name: String, allowInsecure: Bool) throws(ConfigurationError) {
        let lowercased = url.lowercased()
        switch true {
        case lowercased.hasPrefix("https://"):
            return
        case lowercased.hasPrefix("http://") && allowInsecure:
            return
        case lowercased.hasPrefix("http://"):
            throw ConfigurationError(
                "\(name) is a cleartext http:// URL, which would carry provider credentials unencrypted: use https://, "
                    + "or set allowInsecureEndpoints: true (local fake providers in tests only)")
        default:
            throw ConfigurationError("\(name) must be an https:// URL")
        }
    }
}

// Decoding with defaults for absent keys: Codable's synthesised init requires every key, so each section
// decodes field by field, keeping the default when a key is missing.
extension GatewayConfiguration {
    enum CodingKeys: String, CodingKey {
        case http, kafka, fcm, hms, apns, delivery, subscriptions, state, shutdown, admin, cluster, logging, apps, appSettings, allowInsecureEndpoints
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        http = try c.decodeIfPresent(HTTP.self, forKey: .http) ?? HTTP()
        kafka = try c.decodeIfPresent(Kafka.self, forKey: .kafka) ?? Kafka()
        fcm = try c.decodeIfPresent(FCM.self, forKey: .fcm) ?? FCM()
        hms = try c.decodeIfPresent(HMS.self, forKey: .hms) ?? HMS()
        apns = try c.decodeIfPresent(APNs.self, forKey: .apns) ?? APNs()
        delivery = try c.decodeIfPresent(Delivery.self, forKey: .delivery) ?? Delivery()
        subscriptions = try c.decodeIfPresent(Subscriptions.self, forKey: .subscriptions) ?? Subscriptions()
        state = try c.decodeIfPresent(State.self, forKey: .state) ?? State()
        shutdown = try c.decodeIfPresent(Shutdown.self, forKey: .shutdown) ?? Shutdown()
        admin = try c.decodeIfPresent(Admin.self, forKey: .admin) ?? Admin()
        cluster = try c.decodeIfPresent(Cluster.self, forKey: .cluster) ?? Cluster()
        logging = try c.decodeIfPresent(Logging.self, forKey: .logging) ?? Logging()
        apps = try c.decodeIfPresent([String: AppSettings].self, forKey: .apps) ?? [:]
        appSettings = try c.decodeIfPresent(AppSettingsSource.self, forKey: .appSettings) ?? AppSettingsSource()
        allowInsecureEndpoints = try c.decodeIfPresent(Bool.self, forKey: .allowInsecureEndpoints) ?? false
    }
}

extension GatewayConfiguration.Delivery {
    enum CodingKeys: String, CodingKey { case lanes }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        lanes = try c.decodeIfPresent(Int.self, forKey: .lanes) ?? lanes
    }
}

extension GatewayConfiguration.HTTP {
    enum CodingKeys: String, CodingKey {
        case host, port, advertisedAddress, ownerWaitMs, forwardTimeoutMs, writeTimeoutMs
        case idleTimeoutMs, readTimeoutMs, trustedProxies
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        host = try c.decodeIfPresent(String.self, forKey: .host) ?? host
        port = try c.decodeIfPresent(Int.self, forKey: .port) ?? port
        advertisedAddress = try c.decodeIfPresent(String.self, forKey: .advertisedAddress) ?? advertisedAddress
        ownerWaitMs = try c.decodeIfPresent(Int.self, forKey: .ownerWaitMs) ?? ownerWaitMs
        forwardTimeoutMs = try c.decodeIfPresent(Int.self, forKey: .forwardTimeoutMs) ?? forwardTimeoutMs
        writeTimeoutMs = try c.decodeIfPresent(Int.self, forKey: .writeTimeoutMs) ?? writeTimeoutMs
        idleTimeoutMs = try c.decodeIfPresent(Int.self, forKey: .idleTimeoutMs) ?? idleTimeoutMs
        readTimeoutMs = try c.decodeIfPresent(Int.self, forKey: .readTimeoutMs) ?? readTimeoutMs
        trustedProxies = try c.decodeIfPresent([String].self, forKey: .trustedProxies) ?? trustedProxies
    }
}

extension GatewayConfiguration.State {
    enum CodingKeys: String, CodingKey { case standbyReplicas, maxPartitionBytes, maxReplicaBytes }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        standbyReplicas = try c.decodeIfPresent(Int.self, forKey: .standbyReplicas) ?? standbyReplicas
        maxPartitionBytes = try c.decodeIfPresent(Int.self, forKey: .maxPartitionBytes) ?? maxPartitionBytes
        maxReplicaBytes = try c.decodeIfPresent(Int.self, forKey: .maxReplicaBytes) ?? maxReplicaBytes
    }
}

extension GatewayConfiguration.Admin {
    enum CodingKeys: String, CodingKey { case tokenFile, token }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        tokenFile = try c.decodeIfPresent(String.self, forKey: .tokenFile) ?? tokenFile
        token = try c.decodeIfPresent(String.self, forKey: .token) ?? token
    }
}

extension GatewayConfiguration.Cluster {
    enum CodingKeys: String, CodingKey { case secretFile, secret }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        secretFile = try c.decodeIfPresent(String.self, forKey: .secretFile) ?? secretFile
        secret = try c.decodeIfPresent(String.self, forKey: .secret) ?? secret
    }
}

extension GatewayConfiguration.Shutdown {
    enum CodingKeys: String, CodingKey { case drainSeconds }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        drainSeconds = try c.decodeIfPresent(Double.self, forKey: .drainSeconds) ?? drainSeconds
    }
}

extension GatewayConfiguration.Kafka {
    /// Each change partition's share of `maxInFlightRecords` (``OffsetLedger``).
    var inFlightShare: InFlightShare {
        maxInFlightRecordsPerPartition > 0
            ? InFlightShare(limit: maxInFlightRecordsPerPartition) : .derived(maxInFlight: maxInFlightRecords)
    }

    enum CodingKeys: String, CodingKey {
        case brokers, groupId, changesTopic, deadLetterTopic, userNotificationsTopic, stateTopic, snapshotRequestsTopic, membersTopic, partitioner, partitions
        case embeddedBrokerPort, properties, maxInFlightRecords, maxInFlightRecordsPerPartition, startupTimeoutSeconds, workers
    }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        brokers = try c.decodeIfPresent(String.self, forKey: .brokers) ?? brokers
        groupId = try c.decodeIfPresent(String.self, forKey: .groupId) ?? groupId
        changesTopic = try c.decodeIfPresent(String.self, forKey: .changesTopic) ?? changesTopic
        deadLetterTopic = try c.decodeIfPresent(String.self, forKey: .deadLetterTopic) ?? deadLetterTopic
        userNotificationsTopic = try c.decodeIfPresent(String.self, forKey: .userNotificationsTopic) ?? userNotificationsTopic
        stateTopic = try c.decodeIfPresent(String.self, forKey: .stateTopic) ?? stateTopic
        snapshotRequestsTopic = try c.decodeIfPresent(String.self, forKey: .snapshotRequestsTopic) ?? snapshotRequestsTopic
        membersTopic = try c.decodeIfPresent(String.self, forKey: .membersTopic) ?? membersTopic
        partitioner = try c.decodeIfPresent(KeyPartitioner.self, forKey: .partitioner) ?? partitioner
        partitions = try c.decodeIfPresent(Int.self, forKey: .partitions) ?? partitions
        embeddedBrokerPort = try c.decodeIfPresent(Int.self, forKey: .embeddedBrokerPort) ?? embeddedBrokerPort
        properties = try c.decodeIfPresent([String: String].self, forKey: .properties) ?? properties
        maxInFlightRecords = try c.decodeIfPresent(Int.self, forKey: .maxInFlightRecords) ?? maxInFlightRecords
        maxInFlightRecordsPerPartition =
            try c.decodeIfPresent(Int.self, forKey: .maxInFlightRecordsPerPartition) ?? maxInFlightRecordsPerPartition
        startupTimeoutSeconds = try c.decodeIfPresent(Int.self, forKey: .startupTimeoutSeconds) ?? startupTimeoutSeconds
        workers = try c.decodeIfPresent(Int.self, forKey: .workers) ?? workers
    }
}

extension GatewayConfiguration.FCM {
    enum CodingKeys: String, CodingKey { case baseURL, tokenURL, caFile, requestTimeoutMs, maxConnections, maxStreamsPerConnection, maxInFlightPerProject }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        baseURL = try c.decodeIfPresent(String.self, forKey: .baseURL) ?? baseURL
        tokenURL = try c.decodeIfPresent(String.self, forKey: .tokenURL) ?? tokenURL
        caFile = try c.decodeIfPresent(String.self, forKey: .caFile) ?? caFile
        requestTimeoutMs = try c.decodeIfPresent(Int.self, forKey: .requestTimeoutMs) ?? requestTimeoutMs
        maxConnections = try c.decodeIfPresent(Int.self, forKey: .maxConnections) ?? maxConnections
        maxStreamsPerConnection = try c.decodeIfPresent(Int.self, forKey: .maxStreamsPerConnection) ?? maxStreamsPerConnection
        maxInFlightPerProject = try c.decodeIfPresent(Int.self, forKey: .maxInFlightPerProject) ?? maxInFlightPerProject
    }
}

extension GatewayConfiguration.APNs {
    enum CodingKeys: String, CodingKey { case baseURL, developmentBaseURL, caFile, requestTimeoutMs }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        baseURL = try c.decodeIfPresent(String.self, forKey: .baseURL) ?? baseURL
        developmentBaseURL = try c.decodeIfPresent(String.self, forKey: .developmentBaseURL) ?? developmentBaseURL
        caFile = try c.decodeIfPresent(String.self, forKey: .caFile) ?? caFile
        requestTimeoutMs = try c.decodeIfPresent(Int.self, forKey: .requestTimeoutMs) ?? requestTimeoutMs
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
