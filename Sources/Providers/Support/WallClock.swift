#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The system's wall clock in Unix seconds (`CLOCK_REALTIME`), the default clock of the providers.
/// Tests inject their own `@Sendable () -> Double` instead.
public enum WallClock {
    /// Seconds since 1970-01-01T00:00:00Z.
    @Sendable
    public static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1_000_000_000
    }
}
