import Synchronization

/// Keeps librdkafka from flooding the log during an outage: per facility, the first line passes, then at most
/// one line per `interval`, which says how many were held back since.
public final class LogLimiter: Sendable {
    public enum Decision: Equatable, Sendable {
        case log(suppressed: Int)
        case drop
    }

    private struct Window {
        var openedAt: ContinuousClock.Instant
        var suppressed: Int
    }

    private let interval: Duration
    private let windows = Mutex<[String: Window]>([:])

    public init(interval: Duration = .seconds(30)) { self.interval = interval }

    public func decide(facility: String, now: ContinuousClock.Instant = .now) -> Decision {
        windows.withLock { windows in
            guard var window = windows[facility], now - window.openedAt < interval else {
                let suppressed = windows[facility]?.suppressed ?? 0
                windows[facility] = Window(openedAt: now, suppressed: 0)
                if windows.count > 256 { windows = windows.filter { now - $0.value.openedAt < interval } }
                return .log(suppressed: suppressed)
            }
            window.suppressed += 1
            windows[facility] = window
            return .drop
        }
    }
}
