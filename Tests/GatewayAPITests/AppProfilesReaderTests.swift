import Foundation
import GatewayAPI
import PushCore
import Synchronization
import XCTest

@testable import Gateway

/// ``AppProfiles/Reader``: an owner's view of the apps' settings that reads the shared map (under its lock) only
/// after a change, and sees every change made before its lookup.
final class AppProfilesReaderTests: XCTestCase {
    private func profile(_ name: String, shadowMaxBytes: Int? = nil) throws -> AppProfile {
        var settings = AppSettings()
        if let shadowMaxBytes { settings.shadowMaxBytes = shadowMaxBytes }
        return try AppProfileBuilder(httpClient: nil, fcm: .init(), logger: .init(label: "test"))
            .build(name: name, settings: settings, previous: nil)
    }

    func testLookupsReadTheSharedMapOnlyAfterAChange() throws {
        let profiles = AppProfiles()
        let first = try profile("a")
        profiles.set("a", first)
        let reader = AppProfiles.Reader(profiles)
        for _ in 1...5 {
            XCTAssertTrue(reader.profile("a") === first)
            XCTAssertNil(reader.profile("unknown"))
        }
        XCTAssertEqual(reader.refreshes, 1, "nothing changed: read once, when made")

        let second = try profile("a", shadowMaxBytes: 1000)
        profiles.set("a", second)
        XCTAssertTrue(reader.profile("a") === second, "a change made after the first lookup is seen by the next")
        XCTAssertEqual(reader.profile("a")?.settings.shadowMaxBytes, 1000)
        XCTAssertEqual(reader.refreshes, 2, "read again once for the change")

        profiles.set("b", try profile("b"))
        XCTAssertEqual(reader.profile("b")?.name, "b", "an app added is seen")
        profiles.set("a", nil)
        XCTAssertNil(reader.profile("a"), "an app removed is gone")
        XCTAssertEqual(reader.profile("b")?.name, "b")
        XCTAssertEqual(reader.refreshes, 4)
    }

    /// A partition worker's reader (``PartitionWorkers/Local``), on the worker: a change made before the work was
    /// given is seen by it, and an unchanged map is not read again.
    func testAWorkersReaderSeesAChangeMadeBeforeItsWork() throws {
        let profiles = AppProfiles()
        profiles.set("a", try profile("a"))
        let workers = PartitionWorkers(count: 2, profiles: profiles)
        let seen = LockedList()
        for _ in 1...3 {
            workers.run(on: 1) { local in seen.append(local.profile("a")?.settings.shadowMaxBytes) }
        }
        workers.barrier()
        XCTAssertEqual(workers.local(of: 1).profileRefreshes, 1, "three lookups, one read of the shared map")
        XCTAssertEqual(workers.local(of: 0).profileRefreshes, 1, "another worker's reader is its own (read once, when made)")

        profiles.set("a", try profile("a", shadowMaxBytes: 2000))
        workers.run(on: 3) { local in seen.append(local.profile("a")?.settings.shadowMaxBytes) }
        workers.barrier()
        profiles.set("a", nil)
        workers.run(on: 1) { local in seen.append(local.profile("a")?.settings.shadowMaxBytes ?? -1) }
        workers.barrier()
        let values = seen.values
        XCTAssertEqual(values.count, 5)
        XCTAssertEqual(values.suffix(2), [2000, -1], "the change, then the removal, each seen by the next work")
        XCTAssertEqual(workers.local(of: 1).profileRefreshes, 3)
    }
}

/// Values appended from other threads.
private final class LockedList: Sendable {
    private let list = Mutex<[Int?]>([])
    func append(_ value: Int?) { list.withLock { $0.append(value) } }
    var values: [Int?] { list.withLock { $0 } }
}
