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
}
