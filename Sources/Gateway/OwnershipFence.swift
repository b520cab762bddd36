import Dispatch
import Foundation
import GatewayCore
import KafkaClient
import SSLCrypto
import Synchronization

/// The owner tags' randomness and their Kafka header (the rules are ``GatewayCore``'s ``OwnerTag``).
extension OwnerTag {
    /// A fresh owner tag (8 random bytes).
    static func make() -> [UInt8] {
        (try? SecureRandom.bytes(8)) ?? withUnsafeBytes(of: UInt64.random(in: 1...UInt64.max)) { Array($0) }
    }

    static func of(_ record: KafkaRecord) -> [UInt8]? { record.header(header) }

    static func hex(_ tag: [UInt8]?) -> String { tag.map { $0.map { String(format: "%02x", $0) }.joined() } ?? "none" }
}

extension LogRecord {
    init(_ record: KafkaRecord) { self.init(key: record.key, value: record.value, tag: OwnerTag.of(record)) }
}

/// Nanoseconds of the monotonic clock (it runs on while the process is stopped).
enum Uptime {
    static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }
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
