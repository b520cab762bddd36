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
public enum OwnerTag {
    /// The Kafka header carrying a record's owner tag.
    public static let header = "pgw-owner"
    /// The key of a load marker (a tombstone, so that compaction removes it once older than the retention).
    public static let loadMarkerKey: [UInt8] = Array(#"["load-marker"]"#.utf8)
    /// The key of an ownership check: a record written only to learn that nobody else wrote in between.
    public static let ownerCheckKey: [UInt8] = Array(#"["owner-check"]"#.utf8)

    /// Whether `key` is a record the gateway writes for ownership only (markers, checks): no state.
    public static func isControl(_ key: [UInt8]?) -> Bool { key == loadMarkerKey || key == ownerCheckKey }
}

/// A record of the state topic as read back: its key, value and owner tag.
public struct LogRecord: Sendable, Equatable {
    public var key: [UInt8]?
    public var value: [UInt8]
    public var tag: [UInt8]?

    public init(key: [UInt8]?, value: [UInt8], tag: [UInt8]?) {
        self.key = key
        self.value = value
        self.tag = tag
    }
}

/// The owner's knowledge of its own writes in one partition (part of a ``PartitionMachine``).
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
    var waiters: [UInt64: (after: UInt64, callback: Reply)] = [:]
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
public enum GapVerdict: Sendable, Equatable {
    /// Only this owner's records, and records of earlier owners written after its marker (zombie writes: their
    /// keys are to be rewritten from memory).
    case clear(zombieKeys: [[UInt8]])
    /// Another owner's load marker: this replica was superseded.
    case newerOwner
    /// The gap could not be read (the broker is away): try again.
    case unreadable

    /// Judges the records read from a gap of the owner whose current tag is `tag`; `ownTags` are every tag this
    /// replica has written markers with for the partition (a reload writes a new one while earlier writes are in
    /// flight). A record of this replica tagged with an earlier tag is superseded all the same (readers skip it):
    /// its key is rewritten.
    public static func judge(_ records: [LogRecord], tag: [UInt8], ownTags: Set<[UInt8]>) -> GapVerdict {
        var zombies: [[UInt8]] = []
        for record in records {
            let owner = record.tag
            if record.key == OwnerTag.loadMarkerKey {
                if let owner, owner == tag || ownTags.contains(owner) { continue }
                return .newerOwner
            }
            guard owner != tag, let key = record.key, key != OwnerTag.ownerCheckKey else { continue }
            zombies.append(key)
        }
        return .clear(zombieKeys: zombies)
    }
}
