import KafkaClient

/// What the change consumer's polling thread hands on, per partition (``ChangeConsumer``).
///
/// A partition's records are handed on only once its loaded state was *activated* on the polling thread. Until then
/// they are dropped, and the first dropped offset of each topic partition (the change topic's and its companion's) is
/// kept. The activation returns those offsets: the partition is sought back to them before it is fetched again, so a
/// record fetched while the partition was loading is read again, in order, instead of skipped. (librdkafka applies a
/// pause asynchronously, and a pause that races the start of a newly assigned partition's fetcher is lost: its records
/// then arrive during the load. The fetch position has moved past them; without the seek they would never be read.)
///
/// A new assignment (read from the committed offset), a partition taken back (sought back to it) or given up forgets
/// what was dropped. `State` is the loaded partition (``PartitionState``); a value type so that one lock guards it.
struct RecordIntake<State: AnyObject> {
    /// The loaded state each active partition's records are matched against.
    private var active: [Int32: State] = [:]
    /// The first offset dropped per topic partition since the partition was assigned (or taken back).
    private var dropped: [TopicPartition: Int64] = [:]
    /// Loaded states waiting for the polling thread to activate them.
    private(set) var due: [(partition: Int32, state: State)] = []
    /// Superseded partitions the group still assigns here, to be taken back on the polling thread (the seek back to
    /// the committed offset and the records dropped must not interleave).
    private(set) var takeBack: Set<Int32> = []

    /// Whether a record of `partition` is handed on: its partition is active and `isServing` its state. Else the record
    /// is dropped, and its offset kept when it is the first.
    mutating func accepts(topic: String, partition: Int32, offset: Int64, isServing: (State) -> Bool) -> Bool {
        if let state = active[partition], isServing(state) { return true }
        drop(topic: topic, partition: partition, offset: offset)
        return false
    }

    /// A record of `partition` not handed on after all (given up meanwhile): kept when it is the first.
    mutating func drop(topic: String, partition: Int32, offset: Int64) {
        let key = TopicPartition(topic: topic, partition: partition)
        if offset < dropped[key] ?? .max { dropped[key] = offset }
    }

    /// `state` was loaded for `partition`: activated by the next ``takeRequests()``.
    mutating func loaded(_ partition: Int32, state: State) { due.append((partition, state)) }

    /// `partition` is to be taken back on the polling thread.
    mutating func requestTakeBack(_ partition: Int32) { takeBack.insert(partition) }

    /// The take-backs and activations requested since the last call, handed to the polling thread.
    mutating func takeRequests() -> (takeBack: Set<Int32>, due: [(partition: Int32, state: State)]) {
        defer {
            takeBack.removeAll()
            due.removeAll()
        }
        return (takeBack, due)
    }

    /// Activates `state` for `partition`: returns where to seek back to (empty when nothing was dropped), or nil when
    /// that state is already active (nothing to do).
    mutating func activate(_ partition: Int32, state: State) -> [TopicPartition: Int64]? {
        guard active[partition] !== state else { return nil }
        active[partition] = state
        let rewind = dropped.filter { $0.key.partition == partition }
        if !rewind.isEmpty { dropped = dropped.filter { $0.key.partition != partition } }
        return rewind
    }

    /// A new assignment or a partition given up: nothing of these partitions carries over.
    mutating func reset(_ partitions: Set<Int32>) {
        for partition in partitions { active[partition] = nil }
        dropped = dropped.filter { !partitions.contains($0.key.partition) }
        due.removeAll { partitions.contains($0.partition) }
        takeBack.subtract(partitions)
    }
}
