import Foundation
import GatewayAPI
import Hummingbird
import PushCore
import XCTest

@testable import Gateway

/// Admission (issue 17): byte budgets (finding 4), write rates per client, device and uid (finding 6), over
/// the gateway's core and an in-memory state log.
final class AdmissionTests: XCTestCase {
    static let app = "chat"
    static let long = String(repeating: "p", count: 2000)

    func harness(_ settings: AppSettings = AppSettings(), budget: StateBudget = StateBudget()) async throws -> GatewayHarness {
        var settings = settings
        settings.authKeys = [.object(["alg": .string("HS256"), "secret": .string(V2RoutesTests.secret)])]
        let harness = try GatewayHarness(apps: [Self.app: settings], budget: budget)
        try await harness.start()
        addTeardownBlock { await harness.stop() }
        return harness
    }

    func request(_ n: Int, device: String? = nil, client: String = "192.0.2.1", token: String? = nil) throws -> V1SubscribeRequest {
        V1SubscribeRequest(
            app: Self.app, path: try DataPath("/n\(n)/\(Self.long)"), deviceID: device ?? "device-\(n)-" + String(repeating: "d", count: 1000),
            mode: .noData, authToken: token, clientAddress: client)
    }

    func status(_ body: () async throws -> Void) async -> String { await Self.status(body) }

    static func status(_ body: () async throws -> Void) async -> String {
        do {
            try await body()
            return "204"
        } catch let error as APIError {
            return "\(error.status.code) \(error.code)"
        } catch {
            return "\(error)"
        }
    }

    func refusals(_ harness: GatewayHarness, _ quota: String) -> Int {
        harness.metrics.text().split(separator: "\n").filter { $0.hasPrefix("pushgateway_quota_refusals_total{quota=\"\(quota)\"}") }
            .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +)
    }

    func appBytes(_ harness: GatewayHarness) throws -> Int {
        try harness.partition(ofApp: Self.app).withContents { $0.app(Self.app).index.byteCount }
    }

    func estimate(_ harness: GatewayHarness, _ request: V1SubscribeRequest) throws -> Int {
        try harness.partition(ofApp: Self.app).withContents {
            $0.app(Self.app).index.bytesToSubscribe(
                path: request.path, subscriber: SubscriberKey(token: request.deviceID),
                settings: SubscriptionSettings(mode: .noData, expiresAt: .max))
        }
    }

    // MARK: Bytes

    /// Creates stop at the app's byte budget (429 quota_exceeded, counted as app_bytes); refreshes and deletes
    /// pass; a delete makes room again.
    func testAppByteBudget() async throws {
        var settings = AppSettings()
        settings.quotas.maxStateBytes = 40_000
        let harness = try await harness(settings)
        var answers: [String] = []
        for n in 0..<15 { answers.append(await status { try await harness.service.subscribe(try request(n)) }) }
        let admitted = answers.prefix { $0 == "204" }.count
        XCTAssertTrue((8...13).contains(admitted), "\(answers)")  // ~3.2 KB each (the 1 KB device id packed to 0.75 KB)
        XCTAssertEqual(Set(answers.dropFirst(admitted)), ["429 quota_exceeded"])
        XCTAssertLessThanOrEqual(try appBytes(harness), 40_000)
        XCTAssertEqual(refusals(harness, "app_bytes"), 15 - admitted)
        // A refresh of an existing subscription and a delete always pass; the delete makes room.
        let refresh = await status { try await harness.service.subscribe(try request(0)) }
        XCTAssertEqual(refresh, "204")
        let removed = await status {
            try await harness.service.unsubscribe(
                V1UnsubscribeRequest(app: Self.app, path: try request(1).path, deviceID: try request(1).deviceID, authToken: nil, clientAddress: "192.0.2.1"))
        }
        XCTAssertEqual(removed, "204")
        let again = await status { try await harness.service.subscribe(try request(100)) }
        XCTAssertEqual(again, "204")
    }

    /// Two creates in flight at once cannot both take the last bytes: the second one's reservation sees the
    /// first one's.
    func testConcurrentCreatesAtTheLastBytes() async throws {
        let harness = try await harness()
        let first = try request(1)
        let needed = try estimate(harness, first)
        var settings = AppSettings()
        settings.authKeys = [.object(["alg": .string("HS256"), "secret": .string(V2RoutesTests.secret)])]
        settings.quotas.maxStateBytes = try appBytes(harness) + needed + needed / 2
        let built = try AppProfileBuilder(httpClient: nil, fcm: .init(), logger: harness.logger).build(name: Self.app, settings: settings, previous: nil)
        harness.profiles.set(
            Self.app,
            AppProfile(
                name: Self.app, settings: settings, verifier: built.verifier, rules: built.rules, rulesFingerprint: built.rulesFingerprint,
                encryption: built.encryption, senders: [.mobile: harness.sender], fcmAccountFingerprint: nil))
        harness.log.holdAcknowledgements()
        let tasks = try [1, 2].map { n in
            let request = try request(n)
            let service = harness.service
            return Task { await Self.status { try await service.subscribe(request) } }
        }
        try await Task.sleep(for: .milliseconds(50))
        harness.log.releaseAcknowledgements()
        var answers: [String] = []
        for task in tasks { answers.append(await task.value) }
        XCTAssertEqual(answers.sorted(), ["204", "429 quota_exceeded"])
        XCTAssertEqual(harness.subscriptions(Self.app).count, 1)
        XCTAssertEqual(try harness.partition(ofApp: Self.app).bytes?.reserved, 0, "every reservation released")
    }

    /// The partition's budget (429) and the replica's high-water mark (507 insufficient_storage), each counted.
    func testPartitionBudgetAndReplicaMark() async throws {
        let probe = try await harness()
        let needed = try estimate(probe, try request(1))
        let base = probe.store.budget.replica.bytes
        await probe.stop()

        let partitionBound = try await harness(budget: StateBudget(maxPartitionBytes: base + needed + needed / 2))
        let first = await status { try await partitionBound.service.subscribe(try request(1)) }
        let second = await status { try await partitionBound.service.subscribe(try request(2)) }
        XCTAssertEqual([first, second], ["204", "429 quota_exceeded"])
        XCTAssertEqual(refusals(partitionBound, "partition_bytes"), 1)

        let replicaBound = try await harness(budget: StateBudget(maxReplicaBytes: base + needed + needed / 2))
        let one = await status { try await replicaBound.service.subscribe(try request(1)) }
        let two = await status { try await replicaBound.service.subscribe(try request(2)) }
        XCTAssertEqual([one, two], ["204", "507 insufficient_storage"])
        XCTAssertEqual(refusals(replicaBound, "replica_bytes"), 1)
        XCTAssertEqual(replicaBound.store.budget.replica.reserved, 0)
        // The gauges.
        let text = Probe(health: Health(), store: replicaBound.store, metrics: replicaBound.metrics).metricsText()
        XCTAssertTrue(text.contains("pushgateway_state_bytes_limit \(base + needed + needed / 2)"), text)
    }

    func testDefaultReplicaMarkFromTheContainerLimit() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cgroup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("memory"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        XCTAssertEqual(StateBudget.defaultReplicaMark(root: root.path), 0, "no limit: no mark")
        try "9223372036854771712\n".write(to: root.appendingPathComponent("memory/memory.limit_in_bytes"), atomically: true, encoding: .utf8)
        XCTAssertEqual(StateBudget.defaultReplicaMark(root: root.path), 0, "cgroup v1 without a limit")
        try "1073741824\n".write(to: root.appendingPathComponent("memory/memory.limit_in_bytes"), atomically: true, encoding: .utf8)
        XCTAssertEqual(StateBudget.defaultReplicaMark(root: root.path), 1_073_741_824 / 10 * 6)
        try "max\n".write(to: root.appendingPathComponent("memory.max"), atomically: true, encoding: .utf8)
        XCTAssertEqual(StateBudget.defaultReplicaMark(root: root.path), 0, "cgroup v2 without a limit")
        try "2147483648\n".write(to: root.appendingPathComponent("memory.max"), atomically: true, encoding: .utf8)
        XCTAssertEqual(StateBudget.defaultReplicaMark(root: root.path), 2_147_483_648 / 10 * 6)
    }

    // MARK: Rates

    func small(_ n: Int, device: String, client: String, token: String? = nil) throws -> V1SubscribeRequest {
        V1SubscribeRequest(app: Self.app, path: try DataPath("/r/\(n)"), deviceID: device, mode: .noData, authToken: token, clientAddress: client)
    }

    /// One client at full speed exhausts its own bucket, not another client's; a device written from many
    /// clients is limited by its own bucket; the app's bucket is the backstop.
    func testAnonymousWritesPerClientPerDeviceAndPerApp() async throws {
        var settings = AppSettings()
        settings.quotas.clientWritesPerSecond = 0.001
        settings.quotas.clientWriteBurst = 5
        settings.quotas.deviceWritesPerSecond = 0.001
        settings.quotas.deviceWriteBurst = 3
        settings.quotas.anonymousWritesPerSecond = 0.001
        settings.quotas.anonymousWriteBurst = 12
        settings.quotas.maxSubscriptionsPerDevice = 1000
        let harness = try await harness(settings)
        var flood: [String] = []
        for n in 0..<10 { flood.append(await status { try await harness.service.subscribe(try small(n, device: "dev\(n)", client: "192.0.2.1")) }) }
        XCTAssertEqual(flood, Array(repeating: "204", count: 5) + Array(repeating: "429 quota_exceeded", count: 5))
        XCTAssertEqual(refusals(harness, "client_rate"), 5)
        // Another client is not affected.
        let other = await status { try await harness.service.subscribe(try small(50, device: "devX", client: "192.0.2.2")) }
        XCTAssertEqual(other, "204")
        // One device from many clients: its own bucket (3) stops it.
        var device: [String] = []
        for n in 0..<5 { device.append(await status { try await harness.service.subscribe(try small(60 + n, device: "victim", client: "198.51.100.\(n)")) }) }
        XCTAssertEqual(device, ["204", "204", "204", "429 quota_exceeded", "429 quota_exceeded"])
        XCTAssertEqual(refusals(harness, "device_rate"), 2)
        // The app's backstop: 5 + 1 + 3 spent of 12.
        var spread: [String] = []
        for n in 0..<5 { spread.append(await status { try await harness.service.subscribe(try small(80 + n, device: "spread\(n)", client: "203.0.113.\(n)")) }) }
        XCTAssertEqual(spread, ["204", "204", "204", "429 quota_exceeded", "429 quota_exceeded"])
        XCTAssertEqual(refusals(harness, "anonymous_rate"), 2)
    }

    /// Refused writes spend nothing: a write the rules, the owner check or a quota refuses leaves the buckets
    /// as they were.
    func testRefusedWritesSpendNothing() async throws {
        var settings = AppSettings()
        settings.quotas.clientWritesPerSecond = 0.001
        settings.quotas.clientWriteBurst = 2
        settings.quotas.maxSubscriptionsPerDevice = 1
        let harness = try await harness(settings)
        let first = await status { try await harness.service.subscribe(try small(0, device: "d", client: "192.0.2.9")) }
        XCTAssertEqual(first, "204")
        for n in 1..<6 {
            let refused = await status { try await harness.service.subscribe(try small(n, device: "d", client: "192.0.2.9")) }
            XCTAssertEqual(refused, "429 quota_exceeded")
        }
        XCTAssertEqual(refusals(harness, "device"), 5)
        XCTAssertEqual(refusals(harness, "client_rate"), 0)
        let second = await status { try await harness.service.subscribe(try small(9, device: "e", client: "192.0.2.9")) }
        XCTAssertEqual(second, "204", "the refused writes spent nothing")
    }

    /// v1 writes with a token are limited per uid, whatever the client or device.
    func testTokenBearingWritesPerUID() async throws {
        var settings = AppSettings()
        settings.quotas.userWritesPerSecond = 0.001
        settings.quotas.userWriteBurst = 3
        let harness = try await harness(settings)
        let alice = V2RoutesTests.token(uid: "alice")
        var answers: [String] = []
        for n in 0..<5 {
            answers.append(await status { try await harness.service.subscribe(try small(n, device: "a\(n)", client: "192.0.2.\(n)", token: alice)) })
        }
        XCTAssertEqual(answers, ["204", "204", "204", "429 quota_exceeded", "429 quota_exceeded"])
        XCTAssertEqual(refusals(harness, "user_rate"), 2)
        let bob = await status { try await harness.service.subscribe(try small(9, device: "b", client: "192.0.2.1", token: V2RoutesTests.token(uid: "bob"))) }
        XCTAssertEqual(bob, "204")
    }

    /// A v1 DELETE of nothing answers 204 and writes no record, but spends from the client's bucket.
    func testDeleteOfNothingWritesNothing() async throws {
        var settings = AppSettings()
        settings.quotas.clientWritesPerSecond = 0.001
        settings.quotas.clientWriteBurst = 3
        let harness = try await harness(settings)
        let partition = harness.store.partitionIndex(ofApp: Self.app)
        let before = harness.log.records(GatewayHarness.stateTopic, partition: partition).count
        var answers: [String] = []
        for n in 0..<5 {
            answers.append(
                await status {
                    try await harness.service.unsubscribe(
                        V1UnsubscribeRequest(app: Self.app, path: try DataPath("/gone/\(n)"), deviceID: "nobody\(n)", authToken: nil, clientAddress: "192.0.2.7"))
                })
        }
        XCTAssertEqual(answers, ["204", "204", "204", "429 quota_exceeded", "429 quota_exceeded"])
        XCTAssertEqual(harness.log.records(GatewayHarness.stateTopic, partition: partition).count, before, "no tombstone written")
        // A DELETE of nothing does not spend the device's or the app's buckets.
        let other = await status { try await harness.service.subscribe(try small(1, device: "nobody1", client: "192.0.2.8")) }
        XCTAssertEqual(other, "204")
    }

    // MARK: Client address

    func testClientAddressFromThePeerOrATrustedProxy() throws {
        let trusted = try TrustedProxies(["10.0.0.0/8", "fd00::/8", "192.0.2.10"])
        func resolve(_ peer: String?, _ xff: [String] = []) -> String {
            var headers = HTTPFields()
            headers[values: ClientAddress.forwardedFor] = xff
            return ClientAddress.resolve(peer: peer, headers: headers, trusted: trusted)
        }
        XCTAssertEqual(resolve("203.0.113.5"), "203.0.113.5")
        // An untrusted peer's header is ignored (spoofed).
        XCTAssertEqual(resolve("203.0.113.5", ["1.2.3.4"]), "203.0.113.5")
        XCTAssertEqual(resolve("2001:db8::5", ["1.2.3.4"]), "2001:db8::/64")
        // A trusted proxy: the right-most address that is not itself trusted.
        XCTAssertEqual(resolve("10.1.2.3", ["1.2.3.4, 198.51.100.7, 10.9.9.9"]), "198.51.100.7")
        XCTAssertEqual(resolve("10.1.2.3", ["1.2.3.4", "198.51.100.7", "10.9.9.9"]), "198.51.100.7", "several header lines, in order")
        XCTAssertEqual(resolve("192.0.2.10", ["198.51.100.7:4711"]), "198.51.100.7", "a port is dropped")
        XCTAssertEqual(resolve("fd12::1", ["[2001:db8:1:2::99]:443"]), "2001:db8:1:2::/64")
        XCTAssertEqual(resolve("::ffff:10.0.0.1", ["198.51.100.8"]), "198.51.100.8", "an IPv4-mapped peer is IPv4")
        // Every entry trusted: the left-most; an entry that is not an address: the last trusted proxy.
        XCTAssertEqual(resolve("10.1.2.3", ["10.0.0.7, 10.0.0.8"]), "10.0.0.7")
        XCTAssertEqual(resolve("10.1.2.3", ["garbage"]), "10.1.2.3")
        XCTAssertEqual(resolve("10.1.2.3", []), "10.1.2.3")
        XCTAssertEqual(resolve(nil, ["1.2.3.4"]), "unknown")
        // A /64 keys an IPv6 client.
        XCTAssertEqual(resolve("2001:db8:aa:bb:1::1"), resolve("2001:db8:aa:bb:ffff::2"))
        XCTAssertNotEqual(resolve("2001:db8:aa:bb::1"), resolve("2001:db8:aa:bc::1"))
        for bad in ["10.0.0.0/33", "fd00::/129", "nonsense", "10.0.0.0/x", ""] {
            XCTAssertThrowsError(try TrustedProxies([bad]), bad)
        }
        XCTAssertTrue(try TrustedProxies(["::/0"]).contains(try XCTUnwrap(IPAddress("2001:db8::1"))))
        XCTAssertFalse(try TrustedProxies(["::/0"]).contains(try XCTUnwrap(IPAddress("10.0.0.1"))))
    }

    func testConfigurationOfTimeoutsProxiesAndBudgets() throws {
        var configuration = GatewayConfiguration()
        try configuration.applyEnvironment([
            "PUSH_HTTP_IDLE_TIMEOUT_MS": "1500", "PUSH_HTTP_READ_TIMEOUT_MS": "700",
            "PUSH_HTTP_TRUSTED_PROXIES": "10.0.0.0/8, fd00::/8", "PUSH_STATE_MAX_REPLICA_BYTES": "123456789",
        ])
        XCTAssertEqual(configuration.http.idleTimeoutMs, 1500)
        XCTAssertEqual(configuration.http.readTimeoutMs, 700)
        XCTAssertEqual(configuration.http.trustedProxies, ["10.0.0.0/8", "fd00::/8"])
        XCTAssertEqual(configuration.state.effectiveMaxReplicaBytes, 123_456_789)
        XCTAssertNoThrow(try configuration.validate())
        for (key, value) in [
            ("PUSH_HTTP_IDLE_TIMEOUT_MS", "0"), ("PUSH_HTTP_READ_TIMEOUT_MS", "-5"), ("PUSH_HTTP_READ_TIMEOUT_MS", "99999999999"),
            ("PUSH_HTTP_TRUSTED_PROXIES", "10.0.0.0/40"), ("PUSH_STATE_MAX_REPLICA_BYTES", "-1"),
        ] {
            var bad = GatewayConfiguration()
            try bad.applyEnvironment([key: value])
            XCTAssertThrowsError(try bad.validate(), "\(key)=\(value)")
        }
        var overflow = GatewayConfiguration()
        XCTAssertThrowsError(try overflow.applyEnvironment(["PUSH_HTTP_IDLE_TIMEOUT_MS": "99999999999999999999999"]))
        var quotas = AppQuotas()
        quotas.clientWritesPerSecond = .infinity
        XCTAssertThrowsError(try quotas.validate())
        quotas = AppQuotas()
        quotas.maxStateBytes = 0
        XCTAssertThrowsError(try quotas.validate())
    }
}
