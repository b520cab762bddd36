import CRdKafka

/// Owns an `rd_kafka_conf_t` until a client takes it over.
final class KafkaConfig {
    private(set) var handle: OpaquePointer?

    init(_ properties: [String: String]) throws {
        guard let handle = rd_kafka_conf_new() else { throw KafkaError(message: "rd_kafka_conf_new failed") }
        self.handle = handle
        for (key, value) in properties.sorted(by: { $0.key < $1.key }) {
            try set(key, value)
        }
    }

    func set(_ key: String, _ value: String) throws {
        var errorText = [CChar](repeating: 0, count: 512)
        let result = rd_kafka_conf_set(handle, key, value, &errorText, errorText.count)
        guard result == RD_KAFKA_CONF_OK else {
            throw KafkaError(message: "config \(key): \(String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        }
    }

    /// Hands the handle over to `rd_kafka_new` (which owns it on success).
    func release() -> OpaquePointer? {
        defer { handle = nil }
        return handle
    }

    deinit {
        if let handle { rd_kafka_conf_destroy(handle) }
    }
}

/// Creates an `rd_kafka_t`; the configuration is destroyed when creation fails.
func makeClient(type: rd_kafka_type_t, config: KafkaConfig) throws -> OpaquePointer {
    var errorText = [CChar](repeating: 0, count: 512)
    guard let conf = config.release() else { throw KafkaError(message: "configuration already used") }
    guard let client = rd_kafka_new(type, conf, &errorText, errorText.count) else {
        rd_kafka_conf_destroy(conf)
        throw KafkaError(message: "rd_kafka_new: \(String(decoding: errorText.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
    }
    return client
}
