import CurlHTTP
import Foundation
import GatewayAPI
import GatewayEmbedded
import GatewayLogging
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
    /// Where the notifications of apps without provider credentials go (``ConsoleSink``; tests collect them).
    let consoleSink: @Sendable (_ app: String) -> any PushSender

    public init(configuration: GatewayConfiguration, logger: Logger) {
        self.init(configuration: configuration, logger: logger, consoleSink: { ConsoleSink(app: $0) })
    }

    init(configuration: GatewayConfiguration, logger: Logger, consoleSink: @escaping @Sendable (_ app: String) -> any PushSender) {
        self.configuration = configuration
        self.logger = logger
        self.consoleSink = consoleSink
    }

    public func run() async throws {
        try LibrdkafkaVersion.check()
        logger.info("starting push-gateway", metadata: [LoggingKeys.librdkafkaVersion: "\(LibrdkafkaVersion.string)"])

        var kafka = configuration.kafka
        var embedded: EmbeddedBroker?
        if configuration.usesEmbeddedBroker {
            let broker: EmbeddedBroker
            do {
                broker = try await EmbeddedBroker(
                    topics: [
                        kafka.changesTopic, kafka.deadLetterTopic, kafka.stateTopic, kafka.snapshotRequestsTopic,
                        kafka.userNotificationsTopic,
                    ],
                    singlePartitionTopics: [kafka.membersTopic], partitions: kafka.partitions, port: kafka.embeddedBrokerPort,
                    logger: logger)
            } catch let error as EmbeddedBroker.PortUnavailable {
                throw ConfigurationError(
                    "\(error): set PUSH_KAFKA_EMBEDDED_BROKER_PORT (kafka.embeddedBrokerPort) to a free port, 0 for a random one, or kafka.brokers to use a real broker"
                )
            }
            kafka.brokers = broker.bootstrapServers
            embedded = broker
            logger.notice("embedded broker started (in memory)", metadata: [LoggingKeys.kafkaBootstrap: "\(broker.bootstrapServers)"])
        }
        defer { EmbeddedBroker.keepUntilExit(embedded) }
        if configuration.servesDemoApp {
            logger.notice(
                "serving the built-in demo app: embedded defaults only (its HS256 secret is public); a configuration with a broker, apps or an app settings directory never serves it")
        }
        if configuration.allowInsecureEndpoints {
            logger.warning(
                "allowInsecureEndpoints is set: cleartext http:// provider endpoints are accepted, so provider credentials and notifications may travel unencrypted (for local fake providers in tests only)")
        }
        let hasEmbeddedBroker = embedded != nil

        let metrics = GatewayMetrics()
        let kafkaHealth = KafkaHealth(logger: logger)
        let profiles = AppProfiles()
        let httpClient = try HTTPClient(
            configuration: HTTPClientConfiguration(
                maxConnectionsPerHost: configuration.fcm.maxConnections,
                maxConcurrentStreamsPerConnection: configuration.fcm.maxStreamsPerConnection,
                // What the connections to one host carry: beyond it, requests would only wait inside libcurl.
                maxConcurrentRequests: configuration.fcm.maxConnections * configuration.fcm.maxStreamsPerConnection,
                caFile: configuration.fcm.caFile.isEmpty ? nil : configuration.fcm.caFile),
            logger: logger)
        // Calls forwarded to the replica that owns an app's partition: HTTP/1.1 keep-alive between replicas.
        // Idle hop connections are dropped well before the peer's own idle timeout closes them under a call.
        let peerClient = try HTTPClient(
            configuration: HTTPClientConfiguration(
                maxConnectionsPerHost: 8,
                maxIdleConnectionAge: .milliseconds(max(1_000, min(30_000, configuration.http.idleTimeoutMs / 2)))),
            logger: logger)
        // Webhook receivers are slow and fail in their own ways: their requests never take the providers' places.
        let webhookClient = try HTTPClient(
            configuration: HTTPClientConfiguration(maxConnectionsPerHost: 8, maxConcurrentRequests: 1000), logger: logger)
        var profileBuilder = AppProfileBuilder(
            httpClient: httpClient,
            fcm: FCMConfiguration(
                baseURL: configuration.fcm.baseURL,
                tokenURL: configuration.fcm.tokenURL.isEmpty ? nil : configuration.fcm.tokenURL,
                requestTimeout: .milliseconds(configuration.fcm.requestTimeoutMs)),
            hms: HMSConfiguration(
                baseURL: configuration.hms.baseURL, tokenURL: configuration.hms.tokenURL,
                requestTimeout: .milliseconds(configuration.hms.requestTimeoutMs)),
            maxInFlightPerProject: configuration.fcm.maxInFlightPerProject,
            allowInsecureEndpoints: configuration.allowInsecureEndpoints, consoleSink: consoleSink,
            logger: logger)
        profileBuilder.webhookHTTPClient = webhookClient
        profileBuilder.apns = APNsConfiguration(
            baseURL: configuration.apns.baseURL, developmentBaseURL: configuration.apns.developmentBaseURL,
            caFile: configuration.apns.caFile.isEmpty ? nil : configuration.apns.caFile,
            requestTimeout: .milliseconds(configuration.apns.requestTimeoutMs))

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
        // The one timer service of the gateway's retries and delays (writes retried until stored, repairs, gap reads,
        // take-backs), stopped by the lifecycle just before the producer (``TimersService``).
        let timers = Timers(label: "gateway-timers")
        let writer = try KafkaWriter(
            properties: producerProperties, flushTimeout: drain, health: kafkaHealth, metrics: metrics, timers: timers, logger: logger)
        // A fatal error of a consumer (rare: they are fenced only with static membership) ends the process; the
        // pod restarts. Every client reports brokers down.
        let eventLogger = logger
        let clientEvents: @Sendable (String) -> @Sendable (ClientEvent) -> Void = { client in
            { event in
                switch event {
                case .allBrokersDown: kafkaHealth.brokersDown(client: client)
                case .fatal(let error):
                    eventLogger.critical("fatal Kafka consumer error: exiting so that the pod restarts", metadata: [LoggingKeys.kafkaClient: "\(client)", LoggingKeys.error: "\(error)"])
                    exit(1)
                case .error: break
                }
            }
        }
        let budget = StateBudget(
            maxReplicaBytes: configuration.state.effectiveMaxReplicaBytes, maxPartitionBytes: configuration.state.maxPartitionBytes)
        logger.info(
            "state byte budgets",
            metadata: [
                LoggingKeys.stateMaxReplicaBytes: "\(budget.maxReplicaBytes)", LoggingKeys.stateMaxPartitionBytes: "\(budget.maxPartitionBytes)",
                LoggingKeys.containerMemoryLimit: "\(StateBudget.containerMemoryLimit().map(String.init) ?? "none")",
            ])
        // The state reader reads whole partitions from the beginning at start-up: up to 8 MiB per partition and
        // fetch (librdkafka's default is 1 MiB) means fewer broker round trips (kcat reading 1,000,000 records from
        // Tansu: 2.1 s at 1 MiB, 1.2-1.4 s at 10 MiB); a fetch stays within fetch.max.bytes, and the records fetched
        // ahead within queued.max.messages.kbytes, as before.
        // And once the records fetched ahead pass queued.max.messages.kbytes (a load does: the broker serves faster
        // than the records are applied), librdkafka waits fetch.queue.backoff.ms (1 s by default) before fetching
        // again, while the queue drains in far less: at 10 ms a load of 1,000,000 records took 4.6 s instead of 6.9 s.
        var stateReader = reader("state")
        stateReader["max.partition.fetch.bytes"] = clientProperties["max.partition.fetch.bytes"] ?? "8388608"
        stateReader["fetch.queue.backoff.ms"] = clientProperties["fetch.queue.backoff.ms"] ?? "10"
        let store = StateStore(
            consumer: try KafkaConsumer(properties: stateReader, logger: logger, onEvent: clientEvents("state")),
            verifier: try KafkaConsumer(properties: reader("state-verify"), logger: logger, onEvent: clientEvents("state-verify")),
            sink: writer, topic: kafka.stateTopic, partitioner: kafka.partitioner, metrics: metrics, health: kafkaHealth,
            startupTimeout: .seconds(kafka.startupTimeoutSeconds), budget: budget, logger: logger)
        let health = Health(kafka: kafkaHealth, overBudget: { store.partitionsOverBudget })
        let clusterKey = try configuration.cluster.resolvedKey()
        let membership = Membership(
            consumer: try KafkaConsumer(properties: reader("members"), logger: logger, onEvent: clientEvents("members")),
            sink: writer, store: store, ownership: health.ownership,
            topic: kafka.membersTopic, group: kafka.groupId, address: configuration.advertisedAddress, key: clusterKey,
            metrics: metrics, standbyReplicas: configuration.state.standbyReplicas, logger: logger)
        let changesTopic = kafka.changesTopic
        // The user-notifications topic follows the change topic's assignment, partition for partition: consumed only
        // when it has the change topic's partition count.
        let userNotificationsTopic = await UserNotificationsTopicCheck(
            makeConsumer: { [checker = reader("topic-check"), eventLogger] in
                try KafkaConsumer(properties: checker, logger: eventLogger, onEvent: clientEvents("topic-check"))
            },
            changesTopic: changesTopic, notificationsTopic: kafka.userNotificationsTopic,
            timeoutMs: Int32(clamping: min(kafka.startupTimeoutSeconds, 10) * 1000)
        ).run(metrics: metrics, logger: logger)
        let groupConsumer = try KafkaConsumer(
            properties: consumerProperties, logger: logger, companions: userNotificationsTopic.map { [changesTopic: $0] } ?? [:],
            onStatistics: { json in metrics.recordConsumerLag(statistics: json, topic: changesTopic) },
            onEvent: clientEvents("consumer"))
        let pauses: FetchPauses
        if ProcessInfo.processInfo.environment["PUSH_TEST_LATE_FETCH_PAUSES"] == "1" {
            // Fault tests only: librdkafka applies a pause asynchronously, and one that races the start of a partition's
            // fetcher is lost. Here no pause takes effect before the partition is resumed (a resume is still applied).
            logger.warning("test: pauses of change partitions are not applied (PUSH_TEST_LATE_FETCH_PAUSES)")
            pauses = FetchPauses(
                pause: { _ in },
                resume: { groupConsumer.resume(FetchPauses.fetched($0, topic: changesTopic, companion: userNotificationsTopic)) })
        } else {
            pauses = FetchPauses(consumer: groupConsumer, topic: changesTopic, companion: userNotificationsTopic)
        }
        let ledger = OffsetLedger(
            consumer: groupConsumer, topic: changesTopic, companion: userNotificationsTopic, maxInFlight: kafka.maxInFlightRecords,
            share: kafka.inFlightShare, pauses: pauses, metrics: metrics)
        let tickets = EventTickets(onFinished: { topic, partition, offset in ledger.finish(partition: partition, offset: offset, topic: topic) })
        let payloads = PayloadBuilder(metrics: metrics, logger: logger)
        let board = AppStatusBoard()
        let eventHook = EventHookService(profiles: profiles, metrics: metrics, logger: logger)
        let delivery = DeliveryService(
            profiles: profiles, store: store, tickets: tickets, payloads: payloads, metrics: metrics, board: board, logger: logger,
            lanes: configuration.delivery.effectiveLanes)
        let sweeper = RevocationSweeper(
            store: store, profiles: profiles, delivery: delivery, metrics: metrics,
            interval: .seconds(configuration.subscriptions.expirySweepSeconds), logger: logger)
        let reloader = AppSettingsReloader(
            inline: configuration.apps, source: configuration.appSettings, profiles: profiles, builder: profileBuilder,
            metrics: metrics, board: board, logger: logger, onChange: { _ in sweeper.poke() })
        try reloader.loadInitial()
        let processor = EventProcessor(
            store: store, delivery: delivery, tickets: tickets, ledger: ledger, payloads: payloads,
            sink: writer, deadLetterTopic: kafka.deadLetterTopic, userNotificationsTopic: userNotificationsTopic, metrics: metrics,
            logger: logger)
        let changes = ChangeConsumer(
            consumer: groupConsumer, topic: changesTopic, companion: userNotificationsTopic, store: store, processor: processor, delivery: delivery,
            tickets: tickets, ledger: ledger, pauses: pauses, membership: membership, health: health, sweeper: sweeper, drainTimeout: drain,
            takeBackAfter: .milliseconds(max(10_000, Int64(consumerProperties["session.timeout.ms"] ?? "") ?? 45_000)),
            workers: PartitionWorkers(count: kafka.workers, profiles: profiles), timers: timers, logger: logger)
        store.listen(fenced: { changes.fenced($0) }, rewriteRetryLine: { delivery.rewrite(line: $0) }, releaseTicket: { tickets.release($0) },
            subscriptionEnded: { eventHook.record($0) })
        let service = SubscriptionService(
            store: store, profiles: profiles,
            snapshots: KafkaSnapshotRequester(producer: writer, topic: kafka.snapshotRequestsTopic, logger: logger),
            metrics: metrics, logger: logger, kafka: kafkaHealth)
        let routing = RequestRouter(
            store: store, membership: membership, profiles: profiles, client: peerClient, key: clusterKey,
            ownerWait: .milliseconds(configuration.http.ownerWaitMs),
            forwardTimeout: .milliseconds(configuration.http.forwardTimeoutMs), metrics: metrics, logger: logger, kafka: kafkaHealth)
        let admin = AdminService(
            token: try configuration.admin.resolvedToken(), profiles: profiles, store: store, delivery: delivery, eventHook: eventHook,
            membership: membership, board: board)
        let router = Routes.router(
            subscriptions: service, v2: service, probe: Probe(health: health, store: store, metrics: metrics), routing: routing,
            admin: admin, trustedProxies: try TrustedProxies(configuration.http.trustedProxies), metrics: metrics)
        let host = configuration.http.host
        let consoleApps = profiles.names.filter { profiles.profile($0)?.usesConsole ?? false }
        let brokers = kafka.brokers
        let topic = kafka.changesTopic
        let deadLetterTopic = kafka.deadLetterTopic
        let logger = self.logger
        let http = Application(
            router: router,
            server: GatewayHTTPServer.builder(
                idleTimeout: .milliseconds(configuration.http.idleTimeoutMs), readTimeout: .milliseconds(configuration.http.readTimeoutMs)),
            configuration: .init(address: .hostname(host, port: configuration.http.port), serverName: "push-gateway"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.notice("HTTP API listening", metadata: [LoggingKeys.httpAddress: "http://\(host):\(port)"])
                if hasEmbeddedBroker, let app = consoleApps.first {
                    GettingStarted.print(
                        .init(host: host, port: port, app: app, brokers: brokers, changesTopic: topic, deadLetterTopic: deadLetterTopic))
                }
            },
            logger: logger)

        let watchdog = ShutdownWatchdog(bound: drain + .seconds(5), logger: logger)
        // A run that returned (its shutdown within the bound) needs no watchdog: the process may go on (tests).
        defer { watchdog.disarm() }
        let group = ServiceGroup(
            configuration: .init(
                // Started in this order, stopped in reverse: stop consuming (finish in-flight records, commit),
                // then the settings, the API (calls during the drain are still answered), the deliveries, the
                // membership record, the state reads, the timers (every retry still pending ends), and last the
                // producer (flushed).
                services: [
                    .init(service: writer),
                    .init(service: TimersService(timers: timers)),
                    .init(service: store),
                    .init(service: membership),
                    // Stopped after the deliveries, whose outcomes end subscriptions.
                    .init(service: eventHook),
                    .init(service: delivery),
                    .init(service: http),
                    .init(service: reloader),
                    .init(service: sweeper),
                    .init(service: changes),
                ] + (embedded == nil ? [] : [
                    .init(
                        service: try EmbeddedUpstream(
                            brokers: kafka.brokers, properties: kafka.properties, partitioner: kafka.partitioner.rawValue,
                            changesTopic: kafka.changesTopic, snapshotRequestsTopic: kafka.snapshotRequestsTopic,
                            partitions: kafka.partitions, logger: logger))
                ])
                    + [.init(service: watchdog)],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
        await httpClient.shutdown()
        await peerClient.shutdown()
        await webhookClient.shutdown()
        logger.info("stopped")
    }
}

import Synchronization
