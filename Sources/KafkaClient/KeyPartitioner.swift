import CRdKafka

/// The partition a keyed record goes to, computed with the same function the publishers' client uses, so
/// the gateway knows which partition (and so which replica) owns an app without having seen its events.
public enum KeyPartitioner: String, Sendable, Codable, CaseIterable {
    /// CRC32 of the key: librdkafka's default (`consistent_random`), used by kcat, confluent-kafka clients
    /// and `push-gateway publish`.
    case consistentRandom = "consistent_random"
    /// murmur2 of the key: the Java client's default (`murmur2_random`).
    case murmur2Random = "murmur2_random"

    public func partition(of key: [UInt8], partitions: Int32) -> Int32 {
        guard partitions > 0 else { return 0 }
        return key.withUnsafeBytes { bytes in
            switch self {
            case .consistentRandom:
                return rd_kafka_msg_partitioner_consistent(nil, bytes.baseAddress, bytes.count, partitions, nil, nil)
            case .murmur2Random:
                return rd_kafka_msg_partitioner_murmur2(nil, bytes.baseAddress, bytes.count, partitions, nil, nil)
            }
        }
    }
}
