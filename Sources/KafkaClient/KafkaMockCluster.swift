import CRdKafka
import Glibc
import Logging

/// librdkafka's in-process mock cluster: a Kafka-protocol broker on loopback, for the embedded default
/// ("nothing to configure") and for fault injection in tests.
public final class KafkaMockCluster: @unchecked Sendable {
    private let client: OpaquePointer
    private let callbacks: ClientCallbacks
    private let cluster: OpaquePointer

    /// The `host:port` list clients connect to.
    public let bootstrapServers: String

    public init(brokers: Int32 = 1, logger: Logger) throws {
        let config = try KafkaConfig(["client.id": "push-gateway-embedded-broker", "log_level": "3"])
        let callbacks = ClientCallbacks(logger: logger)
        callbacks.install(on: config)
        self.client = try makeClient(type: RD_KAFKA_PRODUCER, config: config)
        self.callbacks = callbacks
        guard let cluster = rd_kafka_mock_cluster_new(client, brokers) else {
            rd_kafka_destroy(client)
            throw KafkaError(message: "cannot start librdkafka's mock cluster")
        }
        self.cluster = cluster
        self.bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    public func createTopic(_ name: String, partitions: Int32) throws {
        let result = rd_kafka_mock_topic_create(cluster, name, partitions, 1)
        guard result == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(result, context: "create topic \(name)") }
    }

    /// Makes the next `count` requests of `apiKey` fail with `error` (fault injection).
    public func failNextRequests(apiKey: Int16, error: Int32, count: Int) {
        let errors = [rd_kafka_resp_err_t](repeating: rd_kafka_resp_err_t(rawValue: error), count: count)
        errors.withUnsafeBufferPointer { buffer in
            rd_kafka_mock_push_request_errors_array(cluster, apiKey, count, buffer.baseAddress)
        }
    }

    /// The port the mock broker listens on (librdkafka picks a free one at random; it cannot be chosen).
    public var listenerPort: Int? {
        bootstrapServers.split(separator: ",").first?.split(separator: ":").last.flatMap { Int($0) }
    }

    /// Makes broker `brokerID` advertise `host:port` in metadata instead of its listener (for a forwarder on a
    /// fixed port). Uses `rd_kafka_mock_broker_set_host_port`, which the librdkafka loaded at run time (2.16) has but Debian's 2.0.2
    /// headers (the ones compiled against) do not declare: it is looked up at run time. False when the loaded
    /// librdkafka lacks it (clients then learn the listener's port from metadata, which works as well).
    public func advertise(brokerID: Int32 = 1, host: String, port: Int) -> Bool {
        typealias SetHostPort = @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, Int32) -> Void
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "rd_kafka_mock_broker_set_host_port") else {
            return false
        }
        let setHostPort = unsafeBitCast(symbol, to: SetHostPort.self)
        setHostPort(cluster, brokerID, host, Int32(port))
        return true
    }

    public func setBrokerDown(_ brokerID: Int32, down: Bool) {
        if down { rd_kafka_mock_broker_set_down(cluster, brokerID) } else { rd_kafka_mock_broker_set_up(cluster, brokerID) }
    }

    deinit {
        rd_kafka_mock_cluster_destroy(cluster)
        rd_kafka_destroy(client)
    }
}
