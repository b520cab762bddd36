import Dispatch
import Foundation
import KafkaClient
import SSLCrypto
import Synchronization

/// Who may write a state partition, as its log says (docs/ARCHITECTURE.md, "Fenced owners").
///
/// The consumer group decides who owns a partition, but a replica frozen past its session timeout (or cut off
/// from the group coordinator) still believes it owns its partitions until it hears otherwise, and may go on
/// writing and answering. The log is the arbiter: every owner takes the partition with a *load marker* carrying
/// a random owner tag, and tags every record it writes. Offsets are dense, so an owner whose next write lands
/// exactly where it expects knows that nobody wrote in between, hence that no newer owner has taken the
/// partition (its marker would be in between). A write that lands further on reveals a gap: it is read back;
/// another owner's marker there means this replica was superseded (*fenced*): it stops serving the partition,
/// and the writes it made after the marker are never acknowledged. Readers of the log skip every record whose
/// tag is not the one of the last marker before it, and a new owner rewrites, from its memory, every key such
/// a superseded record touched (so that compaction cannot bring one back).
enum OwnerTag {
    /// The Kafka header carrying a record's owner tag.
    static let header = "pgw-owner"
    /// The key of a load marker (a tombstone, so that compaction removes it once older than the retention).
    static let loadMarkerKey: [UInt8] = Array(#"["load-marker"]"#.utf8)
    /// The key of an ownership check: a record written only to learn that nobody else wrote in between.
    static let ownerCheckKey: [UInt8] = Array(#"["owner-check"]"#.utf8)

    /// A fresh owner tag (8 random bytes).
    static func make() -> [UInt8] {
        (try? SecureRandom.bytes(8)) ?? withUnsafeBytes(of: UInt64.random(in: 1...UInt64.max)) { Array($0) }
    }

    static func of(_ record: KafkaRecord) -> [UInt8]? { record.header(header) }

    static func hex(_ tag: [UInt8]?) -> String { tag.map { $0.map { String(format: "%02x", $0) }.joined() } ?? "none" }

    /// Whether `key` is a record the gateway writes for ownership only (markers, checks): no state.
    static func isControl(_ key: [UInt8]?) -> Bool { key == loadMarkerKey || key == ownerCheckKey }
}

/// Nanoseconds of the monotonic clock (it runs on while the process is stopped).
enum Uptime {
    static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }
}

/// The owner's knowledge of its own writes in one partition (under the partition's lock).
struct OwnershipFence {
    /// This replica's tag for its ownership (the one its load marker carries).
    var tag: [UInt8]
    /// Where the owner's next write must land: every offset before it is the owner's, or was checked.
    var expectedOffset: Int64
    /// A gap before an acknowledged write is being read back: nothing later is applied meanwhile.
    var checkingGap = false
    /// Another owner took the partition: nothing more is written, served or acknowledged.
    var fenced = false
    /// When a write was last found to land where expected (ownership confirmed then), and when it was produced.
    var confirmedAt: UInt64
    var confirmedProducedAt: UInt64
    /// Callers waiting for a confirmation of a write produced after `after`.
    var waiters: [UInt64: (after: UInt64, continuation: CheckedContinuation<Bool, Never>)] = [:]
    var nextWaiter: UInt64 = 0
    /// An ownership check will be written shortly (for waiters no write in flight confirms).
    var checkScheduled = false

    init(tag: [UInt8], markerOffset: Int64, at now: UInt64) {
        self.tag = tag
        self.expectedOffset = markerOffset + 1
        self.confirmedAt = now
        self.confirmedProducedAt = now
    }
}

/// What reading back a gap in an owner's offsets found.
enum GapVerdict: Sendable {
    /// Only this owner's records, and records of earlier owners written after its marker (zombie writes: their
    /// keys are to be rewritten from memory).
    case clear(zombieKeys: [[UInt8]])
    /// Another owner's load marker: this replica was superseded.
    case newerOwner
    /// The gap could not be read (the broker is away): try again.
    case unreadable

    /// Judges the records read from a gap of the owner with `tag`.
    static func judge(_ records: [KafkaRecord], tag: [UInt8]) -> GapVerdict {
        var zombies: [[UInt8]] = []
        for record in records {
            let owner = OwnerTag.of(record)
            if record.key == OwnerTag.loadMarkerKey {
                if owner != tag { return .newerOwner }
                continue
            }
            guard owner != tag, let key = record.key, key != OwnerTag.ownerCheckKey else { continue }
            zombies.append(key)
        }
        return .clear(zombieKeys: zombies)
    }
}

/// Notices when this process did not run for a while (SIGSTOP, a frozen VM, a long GC-like pause): a thread
/// ticks every `tick`; a tick that comes more than `threshold` after the previous one marks a stall. Ownership
/// confirmed before a stall is not current any more (the group may have moved the partition meanwhile), and a
/// caller that runs before the ticking thread has noticed sees the overdue tick itself.
final class StallWatch: Sendable {
    static let shared = StallWatch()

    let threshold: UInt64 = 500_000_000
    private let lastTick = Atomic<UInt64>(Uptime.now)
    private let lastStall = Atomic<UInt64>(0)

    private init() {
        let thread = Thread { [self] in
            while true {
                Thread.sleep(forTimeInterval: 0.05)
                let now = Uptime.now
                let previous = lastTick.exchange(now, ordering: .relaxed)
                if now &- previous > threshold { lastStall.store(now, ordering: .relaxed) }
            }
        }
        thread.name = "stall-watch"
        thread.start()
    }

    /// True when the process has run without a stall since `instant` (and is not in one now).
    func ranWithoutStall(since instant: UInt64) -> Bool {
        let now = Uptime.now
        let tick = lastTick.load(ordering: .relaxed)
        return lastStall.load(ordering: .relaxed) < instant && (now <= tick || now - tick <= threshold)
    }
}
