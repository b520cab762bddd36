import GatewayCore
import GatewayTesting
import Foundation
import KafkaClient
import PushCore
import Synchronization
import XCTest

@testable import Gateway

/// Partitions of the state topic loaded at once, their records applied in parallel (``PartitionWorkers``): every
/// partition ends with exactly what its records say (subscriptions, tombstones, revoked markers, unreadable records
/// skipped), and a load returns only once its partition is read up to its marker.
final class ParallelStateLoadTests: XCTestCase {
    private let apps = (0..<12).map { "app\($0)" }
    private let perApp = 150

    private func subscription(_ app: String, _ number: Int) throws -> SubscriptionRecord {
        SubscriptionRecord(
            app: app,
            subscription: Subscription(
                path: try DataPath("/users/u\(number)"), subscriber: SubscriberKey(kind: .mobile, token: "\(app)-token-\(number)", uid: nil),
                settings: SubscriptionSettings(mode: .noData, expiresAt: 4_000_000_000)))
    }

    /// Writes every app's records into its partition; returns the tokens each app must hold and the revoked count
    /// per partition.
    private func write(_ log: InMemoryLog) throws -> (alive: [String: Set<String>], revoked: [Int32: Int]) {
        var alive: [String: Set<String>] = [:]
        var revoked: [Int32: Int] = [:]
        func put(_ app: String, key: [UInt8]?, value: [UInt8]) {
            let partition = KeyPartitioner.consistentRandom.partition(of: Array(app.utf8), partitions: GatewayHarness.partitions)
            _ = log.produce(KafkaRecord(topic: GatewayHarness.stateTopic, partition: partition, key: key, value: value), completion: { _ in })
        }
        // Interleaved across apps (and so partitions), as a replica's writes land.
        for number in 0..<perApp {
            for app in apps {
                let record = try subscription(app, number)
                if number % 10 == 3 {
                    // Written by hand with whitespace: the JSON decoder's path.
                    put(app, key: record.key, value: Array(#"{ "expiresAt": 4000000000, "format": "v1", "mode": "noData" }"#.utf8))
                } else {
                    put(app, key: record.key, value: record.value ?? [])
                }
                alive[app, default: []].insert(record.subscription.subscriber.token)
            }
        }
        for app in apps {
            let partition = KeyPartitioner.consistentRandom.partition(of: Array(app.utf8), partitions: GatewayHarness.partitions)
            for number in stride(from: 0, to: perApp, by: 7) {
                let record = try subscription(app, number)
                put(app, key: record.key, value: [])  // a tombstone
                alive[app]?.remove(record.subscription.subscriber.token)
            }
            for number in stride(from: 5, to: perApp, by: 11) where number % 7 != 0 {
                let record = SubscriptionRecord.revocation(app: app, subscription: try subscription(app, number).subscription, reason: .expired)
                put(app, key: record.key, value: record.value ?? [])
                alive[app]?.remove(record.subscription.subscriber.token)
                revoked[partition, default: 0] += 1
            }
            put(app, key: Array(#"["\#(app)","/a//b","mobile","t",""]"#.utf8), value: Array("{}".utf8))  // unreadable: skipped
            // Subscribed again after its tombstone.
            let again = try subscription(app, 0)
            put(app, key: again.key, value: again.value ?? [])
            alive[app]?.insert(again.subscription.subscriber.token)
        }
        return (alive, revoked)
    }

    func testPartitionsLoadedTogetherHoldExactlyTheirRecords() async throws {
        let log = InMemoryLog(topics: [GatewayHarness.stateTopic: GatewayHarness.partitions])
        let (alive, revoked) = try write(log)
        let harness = try GatewayHarness(apps: Dictionary(uniqueKeysWithValues: apps.map { ($0, AppSettings()) }), log: log)
        try await harness.start(owning: [])
        addTeardownBlock { await harness.stop() }
        // Every partition loaded at once; each load returns only when its partition is read up to its marker.
        let store = harness.store
        let loaded = await withTaskGroup(of: (Int32, Int?).self) { group in
            for index in 0..<GatewayHarness.partitions {
                group.addTask { (index, await store.load(index)?.subscriptionCount) }
            }
            var counts: [Int32: Int] = [:]
            for await (index, count) in group { counts[index] = count }
            return counts
        }
        for index in 0..<GatewayHarness.partitions {
            let expected = apps.filter { store.partitionIndex(ofApp: $0) == index }.reduce(0) { $0 + (alive[$1]?.count ?? 0) }
            XCTAssertEqual(loaded[index] ?? nil, expected, "partition \(index)")
            let partition = try XCTUnwrap(store.partition(index))
            XCTAssertEqual(partition.withContents { $0.revoked.count }, revoked[index] ?? 0, "revoked in partition \(index)")
            XCTAssertEqual(partition.logEnd, Int64(log.records(GatewayHarness.stateTopic, partition: index).count), "log end of \(index)")
            harness.delivery.adopt(try XCTUnwrap(partition.promote()))
        }
        for app in apps {
            XCTAssertEqual(Set(harness.subscriptions(app).map(\.subscriber.token)), alive[app], app)
        }
        XCTAssertTrue(harness.metrics.text().contains("pushgateway_state_records_unreadable_total \(apps.count)"), "unreadable records counted")
    }
}
