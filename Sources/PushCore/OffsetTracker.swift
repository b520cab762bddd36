/// Tracks the records of one partition that are in flight, so that the committed offset never passes a
/// record whose work (notifications handed to the provider, dead-letter write) is not finished.
///
/// Records start in offset order; they may finish in any order. The commit position is the offset after
/// the longest finished prefix.
public struct OffsetTracker: Sendable {
    private var offsets: [Int64] = []
    private var finished: [Bool] = []
    private var head = 0
    public private(set) var commitPosition: Int64?

    public init() {}

    public var inFlight: Int { offsets.count - head }

    /// Registers a record that is now being worked on.
    public mutating func start(_ offset: Int64) {
        offsets.append(offset)
        finished.append(false)
    }

    /// Marks a record finished; returns the new commit position when it advanced.
    public mutating func finish(_ offset: Int64) -> Int64? {
        // Records usually finish near the head; search from there.
        var index = head
        while index < offsets.count, offsets[index] != offset { index += 1 }
        guard index < offsets.count else { return nil }
        finished[index] = true
        var advanced: Int64?
        while head < offsets.count, finished[head] {
            advanced = offsets[head] + 1
            head += 1
        }
        if head > 1024, head * 2 > offsets.count {
            offsets.removeFirst(head)
            finished.removeFirst(head)
            head = 0
        }
        if let advanced { commitPosition = advanced }
        return advanced
    }
}
