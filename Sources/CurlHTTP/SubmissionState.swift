/// What `send` callers and the transfer thread share, kept behind the client's lock. Its methods only
/// decide; the caller acts (resume continuations, wake libcurl) after releasing the lock.
struct SubmissionState {
    /// Requests accepted by `send`, not yet handed to libcurl. FIFO: `queue[head...]`.
    private var queue: [RequestSlot] = []
    private var head = 0
    /// Ids of requests cancelled while inside libcurl, for the thread to remove.
    private var cancellations: [UInt64] = []
    /// Set when the thread is about to block in `curl_multi_poll`, so producers know to wake it.
    private var threadMayBeBlocked = false
    private(set) var isShutdown = false

    var queuedCount: Int { queue.count - head }

    enum EnqueueAction {
        case enqueued(wakeThread: Bool)
        case rejected(HTTPClientError.Code)
    }

    mutating func enqueue(_ slot: RequestSlot, limit: Int) -> EnqueueAction {
        if isShutdown { return .rejected(.shutdown) }
        if queuedCount >= limit { return .rejected(.overloaded) }
        queue.append(slot)
        return .enqueued(wakeThread: takeWakeFlag())
    }

    enum CancelAction {
        /// The request was still queued and has been removed: nothing else to do.
        case removedFromQueue
        /// The thread must remove it from libcurl (it may also have finished meanwhile).
        case askThread(wakeThread: Bool)
        /// The client is shut down; the request has been or will be failed anyway.
        case none
    }

    mutating func cancel(id: UInt64) -> CancelAction {
        if isShutdown { return .none }
        if let index = queue[head...].firstIndex(where: { $0.id == id }) {
            queue.remove(at: index)
            return .removedFromQueue
        }
        cancellations.append(id)
        return .askThread(wakeThread: takeWakeFlag())
    }

    /// Marks the client shut down. Returns whether the thread must be woken.
    mutating func shutdown() -> Bool {
        if isShutdown { return false }
        isShutdown = true
        threadMayBeBlocked = false
        return true
    }

    enum Work {
        /// Start these requests (up to the free capacity) and remove these cancelled ones.
        case run(start: [RequestSlot], cancel: [UInt64])
        /// Shut down: fail these never-started requests and everything in flight, then exit.
        case shutdown(neverStarted: [RequestSlot])
    }

    /// Called by the thread at the top of each iteration with its free capacity.
    mutating func takeWork(capacity: Int) -> Work {
        threadMayBeBlocked = false
        if isShutdown {
            let rest = Array(queue[head...])
            queue = []
            head = 0
            return .shutdown(neverStarted: rest)
        }
        var start: [RequestSlot] = []
        let count = Swift.min(Swift.max(capacity, 0), queuedCount)
        if count > 0 {
            start = Array(queue[head..<(head + count)])
            head += count
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 && head * 2 >= queue.count {
                queue.removeFirst(head)
                head = 0
            }
        }
        var cancel: [UInt64] = []
        if !cancellations.isEmpty { swap(&cancel, &cancellations) }
        return .run(start: start, cancel: cancel)
    }

    /// Called by the thread before `curl_multi_poll`: true when nothing is pending for it, so it may block
    /// until socket activity, a libcurl timer or a wake-up from a producer.
    mutating func prepareToBlock(hasCapacity: Bool) -> Bool {
        if isShutdown || !cancellations.isEmpty || (hasCapacity && queuedCount > 0) { return false }
        threadMayBeBlocked = true
        return true
    }

    private mutating func takeWakeFlag() -> Bool {
        defer { threadMayBeBlocked = false }
        return threadMayBeBlocked
    }
}
