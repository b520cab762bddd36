import CRdKafka

/// An error from librdkafka or from the wrapper.
public struct KafkaError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let message: String
    public let file: String
    public let line: Int
    /// For a failed delivery: whether librdkafka knows the record was never sent (`false`), or it may have reached
    /// the broker (`true`: sent, then no answer). `nil` when not known (not a delivery failure).
    public let possiblyPersisted: Bool?

    public init(code: Int32 = -1, message: String, possiblyPersisted: Bool? = nil, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.possiblyPersisted = possiblyPersisted
        self.file = file
        self.line = line
    }

    init(
        _ error: rd_kafka_resp_err_t, context: String, possiblyPersisted: Bool? = nil, file: String = #fileID, line: Int = #line
    ) {
        self.init(
            code: error.rawValue, message: "\(context): \(String(cString: rd_kafka_err2str(error)))",
            possiblyPersisted: possiblyPersisted, file: file, line: line)
    }

    /// Transient errors librdkafka retries by itself (the record can be produced again later).
    public var isRetriable: Bool {
        code == RD_KAFKA_RESP_ERR__QUEUE_FULL.rawValue || code == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT.rawValue
            || code == RD_KAFKA_RESP_ERR__TRANSPORT.rawValue
    }

    /// The broker refuses the idempotent producer's id or epoch (fenced, epoch or producer id unknown). librdkafka
    /// reports it on each record, not always as a fatal error (Tansu fences a producer that bumped its epoch
    /// after a timeout, for good), yet that producer can never write again: it must be replaced.
    public var fencesProducer: Bool {
        code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED.rawValue || code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH.rawValue
            || code == RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID.rawValue || code == RD_KAFKA_RESP_ERR__FENCED.rawValue
    }

    /// No broker answered (refused, timed out, all down): asking again later may succeed.
    public var isUnreachable: Bool {
        code == RD_KAFKA_RESP_ERR__TRANSPORT.rawValue || code == RD_KAFKA_RESP_ERR__TIMED_OUT.rawValue
            || code == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN.rawValue
    }

    /// The topic (or partition) does not exist.
    public var isUnknownTopic: Bool {
        code == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART.rawValue || code == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC.rawValue
    }

    /// The record was not stored within `message.timeout.ms`.
    public var isTimeout: Bool { code == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT.rawValue }

    /// A produce that failed this way may still have been stored. librdkafka's own word decides when it gave one
    /// (a failed delivery report's `rd_kafka_message_status`): `RD_KAFKA_MSG_STATUS_NOT_PERSISTED` (never sent, or
    /// refused in a way that says it was not written) was not; anything else may have been, **whatever the error**.
    /// librdkafka keeps that status across retries: a record whose first attempt was sent and never answered (the
    /// process was frozen, a request timed out) and whose retry the broker then refused (`PRODUCER_FENCED`, an
    /// epoch or sequence error) is reported with the retry's error, yet its first attempt may be in the log. Taking
    /// such a record as not stored answered a write `503`, or sent it on to the new owner, which had loaded it
    /// (test_zombie.py, a create answered 409). Without a status (not a delivery report): a timeout or an in-flight
    /// purge may have stored it; nothing else did.
    public var maybeStored: Bool {
        if let possiblyPersisted { return possiblyPersisted }
        return code == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT.rawValue || code == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT.rawValue
    }

    public var description: String { "KafkaError(\(code)): \(message)" }
}

/// The librdkafka version loaded at run time.
public enum LibrdkafkaVersion {
    /// The oldest version the gateway accepts: Debian's 2.0.2 mis-parses the ApiVersions response of
    /// recent brokers ("Local: Read underflow").
    public static let minimum: Int32 = 0x0201_00ff

    public static var current: Int32 { rd_kafka_version() }
    public static var string: String { String(cString: rd_kafka_version_str()) }

    /// Throws with instructions when the loaded librdkafka is too old.
    public static func check() throws {
        guard current >= minimum else {
            throw KafkaError(
                message: """
                    librdkafka \(string) is loaded but 2.1 or newer is required (Debian's 2.0.2 cannot talk to \
                    current brokers). Run scripts/setup, which links the librdkafka 2.16 shipped in the \
                    confluent-kafka wheel into .deps/lib, or put a newer librdkafka.so.1 on LD_LIBRARY_PATH.
                    """)
        }
    }
}
