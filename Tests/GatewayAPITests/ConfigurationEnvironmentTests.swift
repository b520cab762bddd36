import Foundation
import XCTest

@testable import Gateway

final class ConfigurationEnvironmentTests: XCTestCase {
    func testSASLCredentialsComeFromTheEnvironment() throws {
        let configuration = try GatewayConfiguration.load(
            file: nil,
            environment: [
                "PUSH_KAFKA_BROKERS": "kafka:9093", "PUSH_KAFKA_SASL_USERNAME": "push-gateway",
                "PUSH_KAFKA_SASL_PASSWORD": "s3cret",
            ])
        XCTAssertEqual(configuration.kafka.properties["sasl.username"], "push-gateway")
        XCTAssertEqual(configuration.kafka.properties["sasl.password"], "s3cret")
        let none = try GatewayConfiguration.load(file: nil, environment: ["PUSH_KAFKA_SASL_PASSWORD": ""])
        XCTAssertNil(none.kafka.properties["sasl.password"])
    }

    /// Values that trapped or made no sense at run time are configuration errors (issue 17, finding 10).
    func testValuesThatWouldTrapAreRefusedAtStart() throws {
        func refused(_ yaml: String, file: StaticString = #filePath, line: UInt = #line) {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString).yaml").path
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(yaml.utf8)))
            defer { try? FileManager.default.removeItem(atPath: path) }
            XCTAssertThrowsError(try GatewayConfiguration.load(file: path, environment: [:]), yaml, file: file, line: line)
        }
        refused("shutdown: {drainSeconds: .inf}")
        refused("shutdown: {drainSeconds: 1e9}")
        refused("http: {ownerWaitMs: 99999999999}")
        refused("http: {advertisedAddress: 'http://10.0.0.5:8080/path'}")
        refused("http: {advertisedAddress: 'http://user@10.0.0.5:8080'}")
        refused("http: {advertisedAddress: '10.0.0.5:8080'}")
        refused("cluster: {secret: 'too-short'}")
        refused("apps: {a: {subscriptionTTLSeconds: 9223372036854775000}}")
        XCTAssertNoThrow(try GatewayConfiguration.load(file: nil, environment: ["PUSH_HTTP_ADVERTISED_ADDRESS": "http://10.0.0.5:8080"]))
        refused("delivery: {lanes: 65}")
        refused("delivery: {lanes: -1}")
        refused("fcm: {maxConnections: 0}")
        refused("fcm: {maxStreamsPerConnection: 0}")
        refused("fcm: {maxStreamsPerConnection: 1001}")
    }

    /// `fcm.maxStreamsPerConnection`: 100 unless set (the providers' client then carries maxConnections × it).
    func testStreamsPerConnection() throws {
        XCTAssertEqual(try GatewayConfiguration.load(file: nil, environment: [:]).fcm.maxStreamsPerConnection, 100)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString).yaml").path
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("fcm: {maxConnections: 4, maxStreamsPerConnection: 250}".utf8)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let set = try GatewayConfiguration.load(file: path, environment: [:])
        XCTAssertEqual(set.fcm.maxConnections, 4)
        XCTAssertEqual(set.fcm.maxStreamsPerConnection, 250)
    }

    /// `delivery.lanes`: one per core by default (0), at least 1; from the file or `PUSH_DELIVERY_LANES`.
    func testDeliveryLanes() throws {
        let defaults = try GatewayConfiguration.load(file: nil, environment: [:])
        XCTAssertEqual(defaults.delivery.lanes, 0)
        XCTAssertEqual(defaults.delivery.effectiveLanes, max(1, ProcessInfo.processInfo.activeProcessorCount))
        let set = try GatewayConfiguration.load(file: nil, environment: ["PUSH_DELIVERY_LANES": "3"])
        XCTAssertEqual(set.delivery.effectiveLanes, 3)
        XCTAssertThrowsError(try GatewayConfiguration.load(file: nil, environment: ["PUSH_DELIVERY_LANES": "three"]))
    }
}
