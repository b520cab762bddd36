import CompactJSON
import Synchronization

/// Keeps notifications to one subscriber in the order their events were consumed, while notifications to
/// different subscribers go out concurrently.
///
/// The consumer thread takes a ``Ticket`` per notification in log order (``reserve(_:)`` is synchronous);
/// the sending task waits for its ticket to come up, sends, then releases it to the next in line.
public final class OrderedDelivery: Sendable {
    public final class Ticket: Sendable {
        fileprivate let key: ExactString
        fileprivate let state = Mutex<TicketState>(TicketState())
        fileprivate init(key: ExactString) { self.key = key }
    }

    fileprivate struct TicketState {
        var ready = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let queues = Mutex<[ExactString: [Ticket]]>([:])

    public init() {}

    /// Number of subscribers with notifications in flight.
    public var activeKeys: Int { queues.withLock { $0.count } }

    /// Takes the next place in `key`'s line. Call in log order.
    public func reserve(_ text: String) -> Ticket {
        let key = ExactString(text)
        let ticket = Ticket(key: key)
        let first = queues.withLock { queues -> Bool in
            if queues[key] == nil {
                queues[key] = [ticket]
                return true
            }
            queues[key]?.append(ticket)
            return false
        }
        if first { ticket.state.withLock { $0.ready = true } }
        return ticket
    }

    /// Suspends until every earlier ticket of the same key was released.
    public func wait(for ticket: Ticket) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = ticket.state.withLock { state -> Bool in
                if state.ready { return true }
                state.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Lets the next ticket of the same key go.
    public func release(_ ticket: Ticket) {
        let next = queues.withLock { queues -> Ticket? in
            // Mutated in place through the dictionary (copying the line out would copy it on every release:
            // O(n) per notification for a subscriber with a backlog).
            guard let index = queues[ticket.key]?.firstIndex(where: { $0 === ticket }) else { return nil }
            queues[ticket.key]?.remove(at: index)
            guard let first = queues[ticket.key]?.first else {
                queues[ticket.key] = nil
                return nil
            }
            return first
        }
        guard let next else { return }
        let waiter = next.state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.ready = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
