import GatewayLogging
import KafkaClient
import Logging
import Synchronization

/// The embedded defaults' broker: librdkafka's mock cluster (in-process, in memory) with the gateway's topics,
/// reachable on a fixed loopback port (`kafka.embeddedBrokerPort`, 9092 by default) so that the banner's
/// commands keep working after a restart.
///
/// The mock cluster cannot listen on a chosen port (it always binds a random one), so a ``BrokerPortForwarder``
/// listens on the fixed port and the broker advertises that port in its metadata: every client, the gateway's
/// own included, goes through the fixed port. Port 0 keeps the random port (tests that run several gateways).
///
/// Shutdown: every client closes (final commit, flush) while the broker is up, during the service group's
/// graceful shutdown; the broker itself lives until the process exits (``keepUntilExit(_:)``), because client
/// handles that services still reference are destroyed later, and a broker gone from under them makes their
/// connection threads log errors after "stopped".
public final class EmbeddedBroker: Sendable {
    private static let untilExit = Mutex<[EmbeddedBroker]>([])

    /// Keeps `broker` alive until the process exits.
    public static func keepUntilExit(_ broker: EmbeddedBroker?) {
        guard let broker else { return }
        untilExit.withLock { $0.append(broker) }
    }

    private let cluster: KafkaMockCluster
    private let forwarder: BrokerPortForwarder?
    /// The `host:port` clients connect to.
    public let bootstrapServers: String

    /// A broker with `topics` of `partitions` partitions each and the single-partition `singlePartitionTopics`,
    /// reachable on `port` of the loopback interface (0: a random port).
    public init(topics: [String], singlePartitionTopics: [String], partitions: Int, port: Int, logger: Logger) async throws {
        let cluster = try KafkaMockCluster(brokers: 1, logger: logger)
        for topic in topics { try cluster.createTopic(topic, partitions: Int32(partitions)) }
        for topic in singlePartitionTopics { try cluster.createTopic(topic, partitions: 1) }
        self.cluster = cluster
        guard port != 0, let listener = cluster.listenerPort else {
            forwarder = nil
            bootstrapServers = cluster.bootstrapServers
            return
        }
        let host = "127.0.0.1"
        do {
            forwarder = try await BrokerPortForwarder(
                host: host, port: port, targetPort: listener, logger: logger)
        } catch {
            throw PortUnavailable(address: "\(host):\(port)", reason: "\(error)")
        }
        bootstrapServers = "\(host):\(port)"
        if !cluster.advertise(host: host, port: port) {
            logger.info(
                "this librdkafka cannot make the embedded broker advertise its fixed port; clients bootstrap through it and then use the broker's own port",
                metadata: [LoggingKeys.kafkaBootstrap: "\(bootstrapServers)", LoggingKeys.kafkaListener: "\(host):\(listener)"])
        }
    }
}

extension EmbeddedBroker {
    /// The fixed port cannot be listened on (taken by another process).
    public struct PortUnavailable: Error, CustomStringConvertible {
        public let address: String
        public let reason: String
        public var description: String { "the embedded broker cannot listen on \(address) (\(reason))" }
    }
}
