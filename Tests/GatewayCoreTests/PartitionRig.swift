import CompactJSON
import GatewayCore
import PushCore
import XCTest

/// A partition machine with a pretend log around it: the records it produces wait for the test to acknowledge
/// them (stored at the log's next offset, or failed), and every other action is recorded in order. Callbacks are
/// the test's own labels.
struct PartitionRig {
    static let app = "toto"
    static let tag: [UInt8] = [1, 2, 3, 4]

    var machine = PartitionMachine(role: .loading)
    /// The log as the broker holds it (the load marker at offset 0 once the rig owns the partition).
    var log: [LogRecord] = []
    /// Produced, not acknowledged yet, in produce order.
    var unacknowledged: [(sequence: UInt64, record: LogRecord)] = []
    /// Everything else the machine asked for, in order.
    var actions: [PartitionAction] = []
    var clock: UInt64 = 1_000

    /// A rig that owns the partition: it wrote its load marker at offset 0 and was promoted.
    static func owner() -> PartitionRig {
        var rig = PartitionRig()
        rig.machine.willWriteMarker(tag: tag)
        rig.log.append(LogRecord(key: OwnerTag.loadMarkerKey, value: [], tag: tag))
        rig.machine.markerWritten(tag: tag, offset: 0, writtenAt: rig.clock)
        rig.machine.readMarker(tag: tag, offset: 0)
        let promoted = rig.machine.promote(uptime: rig.clock, now: 1_000)
        XCTAssertNotNil(promoted)
        rig.take(promoted?.actions ?? [])
        return rig
    }

    mutating func take(_ new: [PartitionAction]) {
        for action in new {
            if case .produce(let sequence, let key, let value, let tag) = action {
                unacknowledged.append((sequence, LogRecord(key: key, value: value, tag: tag)))
            } else {
                actions.append(action)
            }
        }
    }

    /// Empties the recorded actions and returns them.
    mutating func drain() -> [PartitionAction] {
        defer { actions = [] }
        return actions
    }

    /// The broker stores the oldest unacknowledged record at the log's end.
    mutating func store(_ count: Int = 1) {
        for _ in 0..<count {
            let (sequence, record) = unacknowledged.removeFirst()
            log.append(record)
            clock += 1
            take(machine.writeAcknowledged(sequence, .success(Int64(log.count - 1)), uptime: clock))
        }
    }

    mutating func storeAll() { store(unacknowledged.count) }

    /// The oldest unacknowledged record fails.
    mutating func fail(maybeStored: Bool = false) {
        let (sequence, _) = unacknowledged.removeFirst()
        clock += 1
        take(machine.writeAcknowledged(sequence, .failure(WriteFailure(code: "x", message: "refused", maybeStored: maybeStored)), uptime: clock))
    }

    mutating func fire(_ timer: PartitionTimer) {
        clock += 1
        take(machine.timerFired(timer, uptime: clock))
    }

    /// An API decision: `decide` runs on the contents and returns its records, produced with callback `label`.
    @discardableResult
    mutating func decide(_ label: Reply, identity: RetryKey?, _ decide: (inout PartitionContents) -> [StateRecord]) -> PartitionMachine.Admission {
        let admission = machine.admission(identity: identity)
        guard admission == .open else { return admission }
        let records = decide(&machine.contents)
        clock += 1
        take(machine.decided(records, callback: label, uptime: clock))
        return admission
    }

    mutating func subscribe(_ label: Reply, path: String, device: String, mode: SubscriptionMode = .noData, expiresAt: Int64 = .max) throws {
        let subscription = try Self.subscription(path: path, device: device, mode: mode, expiresAt: expiresAt)
        decide(label, identity: Self.key(path: path, device: device)) { _ in
            [.subscription(SubscriptionRecord(app: Self.app, subscription: subscription))]
        }
    }

    @discardableResult
    mutating func match(_ path: String, _ value: String, offset: Int64, now: Int64 = 1_000, ticket: UInt64) throws -> EventOutcome {
        let event = ChangeEvent(app: Self.app, path: try DataPath(path), operation: .set, after: try JSONParser.parse(value))
        clock += 1
        let (outcome, actions) = machine.match(
            event, offset: offset, shadowLimit: 1 << 20, now: now, eventTime: nil, ticket: ticket, uptime: clock
        ) { path, _, _ in Array("v1 \(path)".utf8) }
        take(actions)
        return outcome
    }

    static func subscription(path: String, device: String, mode: SubscriptionMode = .noData, expiresAt: Int64 = .max) throws -> Subscription {
        Subscription(path: try DataPath(path), subscriber: SubscriberKey(token: device), settings: SubscriptionSettings(mode: mode, expiresAt: expiresAt))
    }

    static func key(path: String, device: String) -> RetryKey {
        // Paths in the tests are valid.
        RetryKey(app: app, path: (try? DataPath(path)) ?? DataPath.root, subscriber: SubscriberKey(token: device))
    }

    func isSubscribed(path: String, device: String) -> Bool {
        let key = Self.key(path: path, device: device)
        return machine.contents.existingApp(Self.app)?.index.subscription(path: key.path, subscriber: key.subscriber) != nil
    }

    /// The notifications queued by `actions`, as (device, content) in queue order.
    static func delivered(_ actions: [PartitionAction]) -> [(device: String, content: NotificationContent)] {
        actions.flatMap { action -> [(device: String, content: NotificationContent)] in
            guard case .deliver(let notifications) = action else { return [] }
            return notifications.map { ($0.subscriber.token, $0.content) }
        }
    }

    /// The records produced and not acknowledged, decoded.
    var pendingRecords: [StateRecord] {
        unacknowledged.compactMap { entry in
            guard let key = entry.record.key, !OwnerTag.isControl(key) else { return nil }
            return try? StateRecord.decode(key: key, value: entry.record.value.isEmpty ? nil : entry.record.value)
        }
    }
}

/// The tests name their replies: `"create"` is the reply whose id is that name's hash, and it does nothing.
extension Reply: ExpressibleByStringLiteral {
    public init(stringLiteral name: String) {
        // FNV-1a: the same name, the same id.
        let id = name.utf8.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
        self.init(id: id) { _, _ in }
    }
}
