import Foundation
import GatewayAPI
import PushCore
import Synchronization

/// The byte budgets of state (issue 17, finding 4): per app (`quotas.maxStateBytes`), per partition
/// (`state.maxPartitionBytes`) and a replica-wide high-water mark (`state.maxReplicaBytes`), over the
/// estimate the indexes keep (``AppIndex/byteCount``).
///
/// Meters: each app's index adds its bytes into its app meter, which adds into its partition's (``partitionMeter()``),
/// which adds into ``replica``: every total is O(1) to read and changes by deltas. A create reserves its
/// estimated bytes at every level first, atomically against each limit (two concurrent creates cannot both
/// pass the last bytes, whatever their partitions), and releases them once its record is applied or refused.
/// Deletes and refreshes never reserve: they always pass.
final class StateBudget: Sendable {
    /// Everything this replica holds (owned, loading and standby partitions).
    let replica = ByteMeter()
    /// 0: no mark.
    let maxReplicaBytes: Int
    /// 0: no budget.
    let maxPartitionBytes: Int

    init(maxReplicaBytes: Int = 0, maxPartitionBytes: Int = 0) {
        self.maxReplicaBytes = max(0, maxReplicaBytes)
        self.maxPartitionBytes = max(0, maxPartitionBytes)
    }

    /// A new partition's meter (adds into ``replica``).
    func partitionMeter() -> ByteMeter { ByteMeter(parent: replica) }

    /// Which budget a write or a load would pass.
    enum Refusal: Error, Sendable, Equatable {
        case app(limit: Int)
        case partition(limit: Int)
        case replica(limit: Int)

        var quota: String {
            switch self {
            case .app: "app_bytes"
            case .partition: "partition_bytes"
            case .replica: "replica_bytes"
            }
        }

        var error: APIError {
            switch self {
            case .app(let limit):
                .quotaExceeded(
                    "this application holds its limit of \(limit) bytes of subscriptions (quotas.maxStateBytes); remove subscriptions or raise the limit")
            case .partition(let limit):
                .quotaExceeded(
                    "the state partition of this application holds its limit of \(limit) bytes (state.maxPartitionBytes); remove subscriptions, or the operator raises the limit")
            case .replica(let limit):
                .insufficientStorage(
                    "this replica holds its high-water mark of \(limit) bytes of state (state.maxReplicaBytes); retry later: the operator must add replicas or memory, or lower the apps' quotas.maxStateBytes",
                    retryAfterSeconds: 60)
            }
        }
    }

    /// Bytes reserved by one create at each level; released once (``release()``).
    final class Reservation: Sendable {
        private let held: Mutex<[(ByteMeter, Int)]>

        init(_ held: [(ByteMeter, Int)]) { self.held = Mutex(held) }

        func release() {
            let held = self.held.withLock { held -> [(ByteMeter, Int)] in
                defer { held = [] }
                return held
            }
            for (meter, count) in held { meter.release(count) }
        }
    }

    /// Reserves `bytes` for a create in the app whose meter is `app` (its parent is the partition's meter),
    /// within the app's `appLimit` (0: none), the partition budget and the replica mark.
    func reserve(_ bytes: Int, app: ByteMeter, appLimit: Int) -> Result<Reservation, Refusal> {
        var levels: [(ByteMeter, Int, Refusal)] = [(app, appLimit, .app(limit: appLimit))]
        if let partition = app.parent, partition !== replica {
            levels.append((partition, maxPartitionBytes, .partition(limit: maxPartitionBytes)))
        }
        levels.append((replica, maxReplicaBytes, .replica(limit: maxReplicaBytes)))
        var held: [(ByteMeter, Int)] = []
        for (meter, limit, refusal) in levels {
            guard meter.reserve(bytes, limit: limit) else {
                for (meter, count) in held { meter.release(count) }
                return .failure(refusal)
            }
            held.append((meter, bytes))
        }
        return .success(Reservation(held))
    }

    /// Whether adding `bytes` to the partition whose meter is `partition` (nil: a new one) fits its budget
    /// and the replica mark: nil when it does, else the budget it would pass. For loading a partition.
    func refusal(adding bytes: Int, partition: ByteMeter?) -> Refusal? {
        if maxPartitionBytes > 0, (partition?.bytes ?? 0) + (partition?.reserved ?? 0) + bytes > maxPartitionBytes {
            return .partition(limit: maxPartitionBytes)
        }
        if maxReplicaBytes > 0, replica.bytes + replica.reserved + bytes > maxReplicaBytes {
            return .replica(limit: maxReplicaBytes)
        }
        return nil
    }

    // MARK: The default mark

    /// The container's memory limit (cgroup v2 `memory.max`, else v1 `memory.limit_in_bytes`); nil without one.
    static func containerMemoryLimit(root: String = "/sys/fs/cgroup") -> Int? {
        for file in ["\(root)/memory.max", "\(root)/memory/memory.limit_in_bytes"] {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { continue }
            let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if value == "max" { return nil }
            // cgroup v1 says "no limit" with a huge number (the largest page-aligned Int64).
            guard let bytes = Int(value), bytes > 0, bytes < 1 << 60 else { return nil }
            return bytes
        }
        return nil
    }

    /// The default high-water mark: 60 % of the container's memory limit (the rest is the process itself, the
    /// delivery queues, Kafka's buffers and the allocator's slack); 0 (none) without a limit.
    static func defaultReplicaMark(root: String = "/sys/fs/cgroup") -> Int {
        guard let limit = containerMemoryLimit(root: root) else { return 0 }
        return limit / 10 * 6
    }
}
