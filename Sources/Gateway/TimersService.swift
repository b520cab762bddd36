import KafkaClient
import ServiceLifecycle

/// The gateway's timer service (``KafkaClient/Timers``) in the service lifecycle: it runs until the graceful
/// shutdown reaches it, then stops the timers, which runs every pending work's stopped path at once (a retried
/// write ends, a gap read answers its writes "maybe stored", a backoff ends) and releases it.
///
/// Started right after the producer, so stopped right before it: once every service that schedules (the consumer,
/// the API, the deliveries, the membership, the state store) has stopped, and just before the producer closes.
struct TimersService: Service {
    let timers: Timers

    func run() async throws {
        // Ended by the graceful shutdown, or by a cancellation (then the timers stop too).
        try? await gracefulShutdown()
        await timers.shutdown()
    }
}
