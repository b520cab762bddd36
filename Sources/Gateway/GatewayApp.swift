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
        var embedded: EmbeddedBroker?
        if configuration.usesEmbeddedBroker {
            let broker = try await EmbeddedBroker(kafka: kafka, logger: logger)
            kafka.brokers = broker.bootstrapServers
            embedded = broker
            logger.notice("embedded broker started (in memory)", metadata: ["kafka.bootstrap": "\(broker.bootstrapServers)"])
        }
        defer { EmbeddedBroker.keepUntilExit(embedded) }
        if configuration.servesDemoApp {
            logger.notice(
                "serving the built-in demo app: embedded defaults only (its HS256 secret is public); a configuration with a broker, apps or an app settings directory never serves it")
        }
        let hasEmbeddedBroker = embedded != nil

        let metrics = GatewayMetrics()
        let readiness = Readiness()
        let store = SubscriptionStore()
        let httpClient = try HTTPClient(
            configuration: HTTPClientConfiguration(
                maxConnectionsPerHost: configuration.fcm.maxConnections,
                caFile: configuration.fcm.caFile.isEmpty ? nil : configuration.fcm.caFile),
            logger: logger)
        let profiles = AppProfileBuilder(
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
        let sweeperBox = Mutex<RevocationSweeper?>(nil)
        let reloader = AppSettingsReloader(
            inline: configuration.apps, source: configuration.appSettings, store: store, builder: profiles,
            metrics: metrics, logger: logger, onChange: { _ in sweeperBox.withLock { $0?.poke() } })
        try reloader.loadInitial()
        let dispatcher = Dispatcher(metrics: metrics, logger: logger)

        var clientProperties = kafka.properties
        clientProperties["bootstrap.servers"] = kafka.brokers
        var consumerProperties = clientProperties
        consumerProperties["group.id"] = kafka.groupId
        consumerProperties["client.id"] = "push-gateway-consumer"
        var producerProperties = clientProperties
        producerProperties["client.id"] = "push-gateway-producer"

        let producer = try KafkaProducer(properties: producerProperties, logger: logger)
        var stateProperties = clientProperties
        stateProperties["group.id"] = kafka.groupId + "-state"  // never joins: partitions are assigned explicitly
        stateProperties["enable.auto.commit"] = "false"
        stateProperties["client.id"] = "push-gateway-state"
        // Writes made through another replica become visible here within about this long.
        stateProperties["fetch.wait.max.ms"] = "50"
        let ownership = Ownership(partitioner: kafka.partitioner)
        let stateLog = StateLog(
            consumer: try KafkaConsumer(properties: stateProperties, logger: logger), producer: producer,
            topic: kafka.stateTopic, store: store, ownership: ownership, logger: logger)
        let retries = RetryService(
            store: store, stateLog: stateLog, dispatcher: dispatcher, ownership: ownership, metrics: metrics, logger: logger)
        stateLog.setRetrySink(retries)
        dispatcher.setRetries(retries)
        let pipelineBox = PipelineBox()
        consumerProperties["statistics.interval.ms"] = consumerProperties["statistics.interval.ms"] ?? "5000"
        let changesTopic = kafka.changesTopic
        let consumer = try KafkaConsumer(
            properties: consumerProperties, logger: logger,
            onRebalance: { event in pipelineBox.pipeline?.rebalanced(event) },
            onStatistics: { json in metrics.recordConsumerLag(statistics: json, topic: changesTopic) })
        let pipeline = ChangePipeline(
            consumer: consumer, producer: producer, store: store, dispatcher: dispatcher, metrics: metrics,
            configuration: kafka, readiness: readiness, stateLog: stateLog, ownership: ownership, logger: logger)
        pipelineBox.set(pipeline)

        let sweeper = RevocationSweeper(
            store: store, stateLog: stateLog, dispatcher: dispatcher, ownership: ownership,
            interval: .seconds(configuration.subscriptions.expirySweepSeconds), logger: logger)
        sweeperBox.withLock { $0 = sweeper }
        let service = SubscriptionService(
            store: store, writer: stateLog,
            snapshots: KafkaSnapshotRequester(producer: producer, topic: kafka.snapshotRequestsTopic, logger: logger),
            metrics: metrics, logger: logger)
        let router = Routes.router(
            subscriptions: service, v2: service,
            probe: Probe(readiness: readiness, stateLog: stateLog, metrics: metrics, store: store))
        let host = configuration.http.host
        let consoleApps = store.configuredAppNames.filter { store.app($0)?.profile?.usesConsole ?? false }
        let brokers = kafka.brokers
        let topic = kafka.changesTopic
        let deadLetterTopic = kafka.deadLetterTopic
        let logger = self.logger
        let http = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: configuration.http.port), serverName: "push-gateway"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.notice("HTTP API listening", metadata: ["http.address": "http://\(host):\(port)"])
                if hasEmbeddedBroker, let app = consoleApps.first {
                    GettingStarted.print(
                        .init(host: host, port: port, app: app, brokers: brokers, changesTopic: topic, deadLetterTopic: deadLetterTopic))
                }
            },
            logger: logger)

        let group = ServiceGroup(
            configuration: .init(
                // Stopped in reverse order: the pipeline (finish sends, commit), the API, the state tail.
                services: [
                    .init(service: stateLog),
                    .init(service: http),
                    .init(service: pipeline),
                    .init(service: sweeper),
                    .init(service: reloader),
                    .init(service: retries),
                ] + (embedded == nil ? [] : [.init(service: try EmbeddedUpstream(brokers: kafka.brokers, kafka: kafka, logger: logger))]),
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
        await httpClient.shutdown()
        logger.info("stopped")
    }
}

/// Breaks the cycle consumer → rebalance callback → pipeline → consumer.
final class PipelineBox: Sendable {
    private let box = Mutex<ChangePipeline?>(nil)
    var pipeline: ChangePipeline? { box.withLock { $0 } }
    func set(_ pipeline: ChangePipeline) { box.withLock { $0 = pipeline } }
}

import Synchronization
