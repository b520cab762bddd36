import CurlHTTP
import EventDecoding
import Foundation
import KafkaClient
import Logging
import TestSupport
import XCTest

@testable import Gateway

/// The real gateway (``GatewayApp``: its consumer group member, state store, event processor, delivery and HTTP
/// API, wired as in production) on librdkafka's mock cluster, in process: a subscribe through the API, a change
/// record published to the changes topic, the notification at the app's sender; then a stop, and a second gateway
/// that loads the subscription and resumes after the committed record.
final class PipelineOnMockClusterTests: XCTestCase {
    static let app = "chat"

    func testASubscribeThenAChangeRecordGivesOneNotificationAndARestartKeepsBoth() async throws {
        let logger = Logger(label: "pipeline-test")
        let cluster = try KafkaMockCluster(brokers: 1, logger: logger)
        let kafka = try GatewayConfiguration.load(file: nil, environment: [:]).kafka
        for topic in [kafka.changesTopic, kafka.deadLetterTopic, kafka.stateTopic, kafka.snapshotRequestsTopic] {
            try cluster.createTopic(topic, partitions: Int32(kafka.partitions))
        }
        try cluster.createTopic(kafka.membersTopic, partitions: 1)
        let client = try HTTPClient(logger: logger)
        addTeardownBlock { await client.shutdown() }
        let producer = try KafkaProducer(properties: ["bootstrap.servers": cluster.bootstrapServers], logger: logger)
        defer { producer.close(flushTimeoutMs: 2000) }
        func publish(_ value: String, id: String) async throws {
            let event = try EventDecoder.encode(
                app: Self.app, path: "/rooms/r1", operation: .set, after: value, before: nil, eventID: id,
                timestampMs: Int64(Date().timeIntervalSince1970 * 1000), json: false)
            _ = try await producer.send(KafkaRecord(topic: kafka.changesTopic, key: Array(Self.app.utf8), value: event))
        }

        // First run: subscribe through the API, publish, one notification.
        let first = FakeSender()
        let (run1, base1) = try await start(cluster: cluster, sender: first, client: client, logger: logger)
        let subscribe = try await client.send(
            Self.http1(HTTPRequest(method: .put, url: base1 + "/base/\(Self.app)/.wakeup/rooms/r1?id=device-1&mode=value")))
        XCTAssertEqual(subscribe.status, 204, String(decoding: subscribe.body, as: UTF8.self))
        try await publish(#"{"m":"hello"}"#, id: "e1")
        await waitUntil(timeout: .seconds(30), "the notification sent") { first.sent(to: "device-1").count == 1 }
        let payload = try XCTUnwrap(first.sent(to: "device-1").first)
        XCTAssertTrue(payload.contains(#""sp":"/rooms/r1""#), payload)
        XCTAssertTrue(payload.contains("hello"), payload)
        // Cancelled, the service group stops every service (the consumer commits, the producer flushes).
        run1.cancel()
        _ = await run1.result
        XCTAssertEqual(first.sent(to: "device-1").count, 1, "exactly one notification")

        // Second run on the same topics: the subscription is loaded from the state topic, the first record is not
        // delivered again (its offset was committed), the next one is.
        let second = FakeSender()
        let (run2, _) = try await start(cluster: cluster, sender: second, client: client, logger: logger)
        try await publish(#"{"m":"again"}"#, id: "e2")
        await waitUntil(timeout: .seconds(30), "the second record notified") { second.sent(to: "device-1").count >= 1 }
        XCTAssertEqual(second.sent(to: "device-1").count, 1, "\(second.sent(to: "device-1"))")
        XCTAssertTrue(second.sent(to: "device-1").first?.contains("again") ?? false)
        run2.cancel()
        _ = await run2.result
    }

    /// Starts a gateway on `cluster` whose apps send through `sender`, and waits until it is ready.
    func start(
        cluster: KafkaMockCluster, sender: FakeSender, client: HTTPClient, logger: Logger
    ) async throws -> (Task<Void, any Error>, String) {
        var configuration = try GatewayConfiguration.load(file: nil, environment: [:])
        configuration.kafka.brokers = cluster.bootstrapServers
        // A cancelled run does not leave the group: the next member gets the partitions after this timeout.
        configuration.kafka.properties["session.timeout.ms"] = "6000"
        configuration.kafka.properties["heartbeat.interval.ms"] = "500"
        configuration.http.port = try XCTUnwrap(LoopbackPort.free())
        configuration.http.advertisedAddress = "http://127.0.0.1:\(configuration.http.port)"
        configuration.shutdown.drainSeconds = 2
        configuration.apps = [Self.app: AppSettings()]
        let gateway = GatewayApp(configuration: configuration, logger: logger, consoleSink: { _ in sender })
        let running = Task { try await gateway.run() }
        let base = "http://127.0.0.1:\(configuration.http.port)"
        await waitUntil(timeout: .seconds(60), "the gateway ready") {
            (try? await client.send(Self.http1(HTTPRequest(url: base + "/readyz", timeout: .seconds(2)))).status) == 200
        }
        return (running, base)
    }

    /// The API speaks HTTP/1.1 (the client's default is HTTP/2, for the providers).
    static func http1(_ request: HTTPRequest) -> HTTPRequest {
        var request = request
        request.http1 = true
        return request
    }
}
