import Dispatch
import HeapModule
import Synchronization

/// The gateway's one timer service: every "do this again in N seconds" of the runtime (a write retried until
/// stored, a producer replaced again, a partition's repair, expiry or gap read, a partition taken back) is
/// scheduled here, and ends here at shutdown.
///
/// One serial queue drives one `DispatchSourceTimer` armed for the earliest deadline of a heap; nothing runs while
/// nothing is due. Work never runs inside ``schedule(after:_:)``, ``cancel`` or ``shutdown()``, nor on the Swift
/// cooperative pool: each runs on a global dispatch queue, so it may call blocking code, and it may schedule again.
///
/// Each scheduled work runs exactly once, unless it is cancelled first:
/// - ``Firing/due`` once its delay has passed (never earlier; later under load), while the service runs;
/// - ``Firing/stopped`` at ``shutdown()`` if it is still pending then, at once, whatever its delay: the work ends
///   the way it would on a closed sink (a retried write is not written again, a gap read gives up, a backoff chain
///   reports its end). Scheduled after the shutdown, it runs its stopped path at once too.
/// - A cancelled work (``Handle/cancel()`` before it started) never runs, and is released at once.
///
/// After ``shutdown()`` the service holds no work: nothing scheduled keeps its owner alive past the shutdown,
/// however long its delay. The lifecycle shuts it down once the services that schedule have stopped, just before
/// the producer closes (docs/ARCHITECTURE.md, "Timers").
public final class Timers: Sendable {
    /// Why a scheduled work runs.
    public enum Firing: Sendable, Equatable {
        /// Its delay passed while the service runs.
        case due
        /// The service stopped (at its shutdown, or it was scheduled after it): the work must only end.
        case stopped
    }

    /// A scheduled work, to cancel it.
    public struct Handle: Sendable {
        private let timers: Timers?
        private let id: UInt64

        init(timers: Timers?, id: UInt64) {
            self.timers = timers
            self.id = id
        }

        /// The work will not run (and is released now). False when it ran or started already, or ran stopped.
        @discardableResult
        public func cancel() -> Bool { timers?.cancel(id) ?? false }
    }

    private typealias Work = @Sendable (Firing) -> Void

    private struct Deadline: Comparable {
        /// `DispatchTime.uptimeNanoseconds`.
        var at: UInt64
        var id: UInt64

        static func < (left: Deadline, right: Deadline) -> Bool { (left.at, left.id) < (right.at, right.id) }
    }

    private struct State {
        var stopped = false
        var nextID: UInt64 = 0
        /// The pending works; a cancelled one leaves its deadline in the heap, skipped when it comes up.
        var works: [UInt64: Work] = [:]
        var deadlines = Heap<Deadline>()
        /// The deadline the source is armed for (`.max`: none).
        var armedFor: UInt64 = .max
        var source: (any DispatchSourceTimer)?
    }

    private let state = Mutex(State())

    /// `label` names the queue that keeps the deadlines (it never runs the work).
    public init(label: String = "timers") {
        state.withLock { state in
            let source = DispatchSource.makeTimerSource(queue: DispatchQueue(label: label))
            source.setEventHandler { [weak self] in self?.fireDue() }
            source.activate()
            state.source = source
        }
    }

    deinit {
        state.withLock { $0.source?.cancel() }
    }

    /// Runs `work` after `seconds` (``Firing/due``), or at the shutdown (``Firing/stopped``), whichever comes first.
    @discardableResult
    public func schedule(after seconds: Double, _ work: @escaping @Sendable (Firing) -> Void) -> Handle {
        // At most about 31 years (no overflow); NaN and negatives are now.
        let delay = UInt64(max(0, min(seconds.isNaN ? 0 : seconds, 1e9)) * 1e9)
        let now = DispatchTime.now().uptimeNanoseconds
        let scheduled = state.withLock { state -> UInt64? in
            guard !state.stopped else { return nil }
            state.nextID += 1
            let id = state.nextID
            state.works[id] = work
            let deadline = Deadline(at: now &+ delay, id: id)
            state.deadlines.insert(deadline)
            Self.arm(&state)
            return id
        }
        guard let scheduled else {
            DispatchQueue.global().async { work(.stopped) }
            return Handle(timers: nil, id: 0)
        }
        return Handle(timers: self, id: scheduled)
    }

    /// False once ``shutdown()`` began.
    public var isRunning: Bool { state.withLock { !$0.stopped } }

    /// How many works wait (for tests and diagnostics).
    public var pendingCount: Int { state.withLock { $0.works.count } }

    /// Stops the service: every pending work runs now, with ``Firing/stopped``, and returns once they all have; later
    /// schedules run stopped at once. Idempotent (a second call finds nothing pending).
    public func shutdown() async {
        let pending = state.withLock { state -> [Work] in
            state.stopped = true
            var ordered: [Work] = []
            while let deadline = state.deadlines.popMin() {
                if let work = state.works.removeValue(forKey: deadline.id) { ordered.append(work) }
            }
            state.works = [:]
            state.armedFor = .max
            state.source?.schedule(deadline: .distantFuture)
            return ordered
        }
        guard !pending.isEmpty else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let group = DispatchGroup()
            for work in pending { DispatchQueue.global().async(group: group) { work(.stopped) } }
            group.notify(queue: .global()) { continuation.resume() }
        }
    }

    private func cancel(_ id: UInt64) -> Bool {
        state.withLock { state in
            guard state.works.removeValue(forKey: id) != nil else { return false }
            if state.works.isEmpty {
                state.deadlines = Heap()
                Self.arm(&state)
            }
            return true
        }
    }

    /// On the timer's queue: runs what is due and arms the source for the next deadline.
    private func fireDue() {
        let now = DispatchTime.now().uptimeNanoseconds
        let due = state.withLock { state -> [Work] in
            state.armedFor = .max
            var due: [Work] = []
            while let next = state.deadlines.min, next.at <= now {
                state.deadlines.removeMin()
                if let work = state.works.removeValue(forKey: next.id) { due.append(work) }
            }
            Self.arm(&state)
            return due
        }
        for work in due { DispatchQueue.global().async { work(.due) } }
    }

    /// Arms the source for the earliest pending deadline (under the lock, so that two schedules never arm it out of
    /// order).
    private static func arm(_ state: inout State) {
        while let next = state.deadlines.min, state.works[next.id] == nil { state.deadlines.removeMin() }
        let earliest = state.deadlines.min?.at ?? .max
        guard earliest != state.armedFor else { return }
        state.armedFor = earliest
        state.source?.schedule(deadline: earliest == .max ? .distantFuture : DispatchTime(uptimeNanoseconds: earliest))
    }
}
