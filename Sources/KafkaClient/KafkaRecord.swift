import CRdKafka

/// A record read from or written to Kafka, copied out of librdkafka's buffers.
public struct KafkaRecord: Sendable {
    public var topic: String
    public var partition: Int32
    public var offset: Int64
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [KafkaHeader]
    public var timestampMs: Int64?

    public init(
        topic: String, partition: Int32 = -1, offset: Int64 = -1, key: [UInt8]?, value: [UInt8],
        headers: [KafkaHeader] = [], timestampMs: Int64? = nil
    ) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.headers = headers
        self.timestampMs = timestampMs
    }

    public func header(_ name: String) -> [UInt8]? { headers.first { $0.name == name }?.value }

    public var keyString: String? { key.map { String(decoding: $0, as: UTF8.self) } }

    /// Copies a message (`rd_kafka_message_t *`) out of librdkafka.
    init(message: UnsafeMutablePointer<rd_kafka_message_t>) {
        let m = message.pointee
        topic = m.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        partition = m.partition
        offset = m.offset
        key = m.key.map { Array(UnsafeRawBufferPointer(start: $0, count: m.key_len)) }
        value = m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: m.len)) } ?? []
        var type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &type)
        timestampMs = type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp
        var headerList: OpaquePointer?
        var result: [KafkaHeader] = []
        if rd_kafka_message_headers(message, &headerList) == RD_KAFKA_RESP_ERR_NO_ERROR, let headerList {
            var index = 0
            while true {
                var name: UnsafePointer<CChar>?
                var value: UnsafeRawPointer?
                var size = 0
                guard rd_kafka_header_get_all(headerList, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR,
                    let name
                else { break }
                let bytes = value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
                result.append(KafkaHeader(name: String(cString: name), value: bytes))
                index += 1
            }
        }
        headers = result
    }
}

public struct KafkaHeader: Sendable, Equatable {
    public var name: String
    public var value: [UInt8]

    public init(name: String, value: [UInt8]) {
        self.name = name
        self.value = value
    }

    public init(name: String, string: String) { self.init(name: name, value: Array(string.utf8)) }
}

public struct TopicPartition: Sendable, Hashable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32

    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(topic)[\(partition)]" }
}
