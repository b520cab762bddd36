import Foundation
import GatewayLogging
import Logging
import Synchronization
import ServiceLifecycle

/// Ends the process if a graceful shutdown (SIGTERM, SIGINT) or a failed start takes longer than `bound`:
/// a drain has its own bounds, but a client library waiting on a broker that is gone must not keep the pod past
/// its `terminationGracePeriodSeconds`. The last service of the group, so the first to hear of a shutdown.
final class ShutdownWatchdog: Service, Sendable {
    private let bound: Duration
    private let logger: Logger
    private let disarmed = Atomic<Bool>(false)

    init(bound: Duration, logger: Logger) {
        self.bound = bound
        self.logger = logger
    }

    func run() async throws {
        try? await gracefulShutdown()
        let bound = self.bound
        let logger = self.logger
        let thread = Thread { [self] in
            Thread.sleep(forTimeInterval: bound.seconds)
            if disarmed.load(ordering: .acquiring) { return }
            logger.error("shutdown took longer than its bound; exiting now (unfinished records are replayed)", metadata: [LoggingKeys.bound: "\(bound)"])
            exit(1)
        }
        thread.name = "shutdown-watchdog"
        thread.start()
    }

    /// The shutdown finished within its bound: the process is not ended.
    func disarm() { disarmed.store(true, ordering: .releasing) }
}
