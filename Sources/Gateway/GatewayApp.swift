import CurlHTTP
import Foundation
import GatewayAPI
import Hummingbird
import KafkaClient
import Logging
import Providers
import ServiceLifecycle
import SSLCrypto

/// Builds the gateway from its configuration and runs it until SIGTERM/SIGINT.
///
/// Services, started in order and stopped in reverse: the change pipeline (stop fetching, finish in-flight
/// sends, commit offsets, close) then the HTTP server.
public struct GatewayApp {
    public let configuration: GatewayConfiguration
    public let logger: Logger

    public init(configuration: GatewayConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    public func run() async throws {
        try LibrdkafkaVersion.check()
        logger.info("starting push-gateway", metadata: ["librdkafka.version": "\(LibrdkafkaVersion.string)"])

        var kafka = configuration.kafka
        var embedded: KafkaMockCluster?
        if configuration.usesEmbeddedBroker {
            let cluster = try KafkaMockCluster(brokers: 1, logger: logger)
            try cluster.createTopic(kafka.changesTopic, partitions: Int32(kafka.partitions))
            try cluster.createTopic(kafka.deadLetterTopic, partitions: Int32(kafka.partitions))
            try cluster.createTopic(kafka.stateTopic, partitions: Int32(kafka.partitions))
            try cluster.createTopic(kafka.snapshotRequestsTopic, partitions: Int32(kafka.partitions))
            try cluster.createTopic(kafka.membersTopic, partitions: 1)
            kafka.brokers = cluster.bootstrapServers
            embedded = cluster
            logger.notice("embedded broker started", metadata: ["kafka.bootstrap": "\(cluster.bootstrapServers)"])
        }
        defer { withExtendedLifetime(embedded) {} }
        if configuration.servesDemoApp {
            logger.notice(
                "serving the built-in demo app: embedded defaults only (its HS256 secret is public); a configuration with a broker, apps or an app settings directory never serves it")
        }
        let hasEmbeddedBroker = embedded != nil

        let metrics = GatewayMetrics()
        let kafkaHealth = KafkaHealth(logger: logger)
        let health = Health(kafka: kafkaHealth)
        let profiles = AppProfiles()
        let httpClient = try HTTPClient(
            configuration: HTTPClientConfiguration(
                maxConnectionsPerHost: configuration.fcm.maxConnections,
                caFile: configuration.fcm.caFile.isEmpty ? nil : configuration.fcm.caFile),
            logger: logger)
        // Calls forwarded to the replica that owns an app's partition: HTTP/1.1 keep-alive between replicas.
        let peerClient = try HTTPClient(configuration: HTTPClientConfiguration(maxConnectionsPerHost: 8), logger: logger)
        let profileBuilder = AppProfileBuilder(
            httpClient: httpClient,
            fcm: FCMConfiguration(
                baseURL: configuration.fcm.baseURL,
                tokenURL: configuration.fcm.tokenURL.isEmpty ? nil : configuration.fcm.tokenURL,
                requestTimeout: .milliseconds(configuration.fcm.requestTimeoutMs)),
            hms: HMSConfiguration(
                baseURL: configuration.hms.baseURL, tokenURL: configuration.hms.tokenURL,
                requestTimeout: .milliseconds(configuration.hms.requestTimeoutMs)),
            maxInFlightPerProject: configuration.fcm.maxInFlightPerProject,
            logger: logger)

        var clientProperties = kafka.properties
        clientProperties["bootstrap.servers"] = kafka.brokers
        var producerProperties = clientProperties
        producerProperties["client.id"] = "push-gateway-producer"
        // A write is confirmed or failed within the API's write deadline, never later.
        producerProperties["message.timeout.ms"] = producerProperties["message.timeout.ms"] ?? String(configuration.http.writeTimeoutMs)
        var consumerProperties = clientProperties
        consumerProperties["group.id"] = kafka.groupId
        consumerProperties["client.id"] = "push-gateway-consumer"
        // Cooperative rebalancing: a member joining or leaving moves only the partitions that must move.
        consumerProperties["partition.assignment.strategy"] = consumerProperties["partition.assignment.strategy"] ?? "cooperative-sticky"
        consumerProperties["statistics.interval.ms"] = consumerProperties["statistics.interval.ms"] ?? "5000"
        // Readers of explicitly assigned partitions (never join a group).
        func reader(_ suffix: String) -> [String: String] {
            var properties = clientProperties
            properties["group.id"] = kafka.groupId + "-" + suffix
            properties["enable.auto.commit"] = "false"
            properties["client.id"] = "push-gateway-" + suffix
            properties["fetch.wait.max.ms"] = "50"
            return properties
        }

        let drain = Duration.milliseconds(Int64(configuration.shutdown.drainSeconds * 1000))
        let writer = try KafkaWriter(
            properties: producerProperties, flushTimeout: drain, health: kafkaHealth, metrics: metrics, logger: logger)
        // A fatal error of a consumer (rare: they are fenced only with static membership) ends the process; the
        // pod restarts. Every client reports brokers down.
        let eventLogger = logger
        let clientEvents: @Sendable (String) -> @Sendable (ClientEvent) -> Void = { client in
            { event in
                switch event {
                case .allBrokersDown: kafkaHealth.brokersDown(client: client)
                case .fatal(let error):
                    eventLogger.critical("fatal Kafka consumer error: exiting so that the pod restarts", metadata: ["kafka.client": "\(client)", "error": "\(error)"])
                    exit(1)
                case .error: break
                }
            }
        }
        let store = StateStore(
            consumer: try KafkaConsumer(properties: reader("state"), logger: logger, onEvent: clientEvents("state")),
            sink: writer, topic: kafka.stateTopic, partitioner: kafka.partitioner, metrics: metrics, health: kafkaHealth,
            startupTimeout: .seconds(kafka.startupTimeoutSeconds), logger: logger)
        let membership = Membership(
            consumer: try KafkaConsumer(properties: reader("members"), logger: logger, onEvent: clientEvents("members")),
            sink: writer, store: store,
            topic: kafka.membersTopic, group: kafka.groupId, address: configuration.advertisedAddress,
            standbyReplicas: configuration.state.standbyReplicas, logger: logger)
        let changesTopic = kafka.changesTopic
        let groupConsumer = try KafkaConsumer(
            properties: consumerProperties, logger: logger,
            onStatistics: { json in metrics.recordConsumerLag(statistics: json, topic: changesTopic) },
            onEvent: clientEvents("consumer"))
        let ledger = OffsetLedger(
            consumer: groupConsumer, topic: changesTopic, maxInFlight: kafka.maxInFlightRecords, metrics: metrics)
        let tickets = EventTickets(onFinished: { partition, offset in ledger.finish(partition: partition, offset: offset) })
        let payloads = PayloadBuilder(metrics: metrics, logger: logger)
        let delivery = DeliveryService(
            profiles: profiles, store: store, tickets: tickets, payloads: payloads, metrics: metrics, logger: logger)
        let sweeper = RevocationSweeper(
            store: store, profiles: profiles, delivery: delivery, metrics: metrics,
            interval: .seconds(configuration.subscriptions.expirySweepSeconds), logger: logger)
        let reloader = AppSettingsReloader(
            inline: configuration.apps, source: configuration.appSettings, profiles: profiles, builder: profileBuilder,
            metrics: metrics, logger: logger, onChange: { _ in sweeper.poke() })
        try reloader.loadInitial()
        let processor = EventProcessor(
            store: store, profiles: profiles, delivery: delivery, tickets: tickets, ledger: ledger, payloads: payloads,
            sink: writer, deadLetterTopic: kafka.deadLetterTopic, metrics: metrics, logger: logger)
        let changes = ChangeConsumer(
            consumer: groupConsumer, topic: changesTopic, store: store, processor: processor, delivery: delivery,
            tickets: tickets, ledger: ledger, membership: membership, health: health, sweeper: sweeper, drainTimeout: drain,
            logger: logger)
        let service = SubscriptionService(
            store: store, profiles: profiles,
            snapshots: KafkaSnapshotRequester(producer: writer, topic: kafka.snapshotRequestsTopic, logger: logger),
            metrics: metrics, logger: logger, kafka: kafkaHealth)
        let routing = RequestRouter(
            store: store, membership: membership, client: peerClient,
            waitBound: .milliseconds(configuration.http.ownerWaitMs),
            forwardTimeout: .milliseconds(configuration.http.forwardTimeoutMs), logger: logger, kafka: kafkaHealth)
        let router = Routes.router(
            subscriptions: service, v2: service, probe: Probe(health: health, store: store, metrics: metrics), routing: routing)
        let host = configuration.http.host
        let consoleApps = profiles.names.filter { profiles.profile($0)?.usesConsole ?? false }
        let brokers = kafka.brokers
        let topic = kafka.changesTopic
        let logger = self.logger
        let http = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: configuration.http.port), serverName: "push-gateway"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.notice("HTTP API listening", metadata: ["http.address": "http://\(host):\(port)"])
                if hasEmbeddedBroker, let app = consoleApps.first {
                    GettingStarted.print(host: host, port: port, app: app, brokers: brokers, topic: topic)
                }
            },
            logger: logger)

        let group = ServiceGroup(
            configuration: .init(
                // Started in this order, stopped in reverse: stop consuming (finish in-flight records, commit),
                // then the settings, the API (calls during the drain are still answered), the deliveries, the
                // membership record, the state reads, and last the producer (flushed).
                services: [
                    .init(service: writer),
                    .init(service: store),
                    .init(service: membership),
                    .init(service: delivery),
                    .init(service: http),
                    .init(service: reloader),
                    .init(service: sweeper),
                    .init(service: changes),
                    .init(service: ShutdownWatchdog(bound: drain + .seconds(10), logger: logger)),
                ],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
        await httpClient.shutdown()
        await peerClient.shutdown()
        logger.info("stopped")
    }
}

import Synchronization

/// The newcomer's banner: how to subscribe and publish against the embedded defaults.
enum GettingStarted {
    /// A token of user `demo-user` for the `demo` app, valid 24 hours, so the v2 API can be tried at once.
    static func demoToken() -> String {
        let header = Base64URL.encode(Array(#"{"alg":"HS256","kid":"demo","typ":"JWT"}"#.utf8))
        let exp = Int64(Date().timeIntervalSince1970) + 24 * 3600
        let claims = Base64URL.encode(Array(#"{"exp":\#(exp),"uid":"demo-user"}"#.utf8))
        let input = Array("\(header).\(claims)".utf8)
        let signature = (try? HMACSHA256.authenticationCode(for: input, key: Array(AppSettings.demoSecret.utf8))) ?? []
        return "\(header).\(claims).\(Base64URL.encode(signature))"
    }

    static func print(host: String, port: Int, app: String, brokers: String, topic: String) {
        let v2 =
            app == "demo"
            ? """
                Or with the v2 API (a token of user demo-user, valid 24 h):
                curl -i -X POST 'http://\(host):\(port)/datasync/v2/demo/subscriptions/demo-user' \\
                  -H 'Authorization: Bearer \(demoToken())' \\
                  -d '{"kind":"mobile","mode":"value","path":"/chat","context":"my-device-token"}'

            """ : ""
        let text = """

            ───────────────────────────────────────────────────────────────────────────────
             push-gateway is running with embedded defaults (in-process broker, console sink)
             1. Subscribe a device to /chat in value mode:
                curl -i -X PUT 'http://\(host):\(port)/base/\(app)/.wakeup/chat?id=my-device-token&mode=value'
            \(v2) 2. Publish writes (with the bundled command, or kcat and the JSON form of the event):
                .build/debug/push-gateway publish --brokers \(brokers) --app \(app) --path /chat --op SET --after '{"m1":"hi"}'
                echo '{"appId":"\(app)","path":"/chat/m2","op":"SET","after":"\\"hello\\""}' | \\
                  kcat -P -b \(brokers) -t \(topic) -k \(app) -H content-type=application/json
             3. The notification is printed here as a {"sink":"console",...} line.
            ───────────────────────────────────────────────────────────────────────────────

            """
        FileHandle.standardError.write(Data(text.utf8))
    }
}
