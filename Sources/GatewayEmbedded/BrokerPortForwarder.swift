import GatewayLogging
import Logging
import NIOCore
import NIOPosix

/// Listens on a fixed loopback port and forwards every connection to another port (the embedded broker's,
/// which librdkafka's mock cluster picks at random): the fixed port in the banner's commands survives a restart.
/// Runs on SwiftNIO's event loops; no thread of its own. It listens as long as the process runs (see
/// ``EmbeddedBroker``).
final class BrokerPortForwarder: Sendable {
    private let channel: any Channel
    /// The port listened on (the asked one, or the kernel's choice for 0).
    let port: Int

    /// Binds `host:port` and forwards to `host:targetPort`. Throws when the port is taken.
    init(host: String, port: Int, targetPort: Int, logger: Logger) async throws {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                // The outbound connection shares the inbound one's event loop, so the two handlers call each
                // other directly; the inbound channel starts reading only once this future completes.
                // TCP_NODELAY is best effort: some sandboxes (a container under gVisor) refuse the option with
                // EACCES, and a channel option that fails would close every connection.
                bestEffortNoDelay(inbound)
                    .flatMap { ClientBootstrap(group: inbound.eventLoop).connect(host: host, port: targetPort) }
                    .flatMap { outbound in bestEffortNoDelay(outbound).map { outbound } }
                    .flatMapThrowing { outbound in
                        let (inboundSide, outboundSide) = ForwardingHandler.pair()
                        try inbound.pipeline.syncOperations.addHandler(inboundSide)
                        try outbound.pipeline.syncOperations.addHandler(outboundSide)
                    }
                    .flatMapErrorThrowing { error in
                        logger.debug("embedded broker connection refused", metadata: [LoggingKeys.error: "\(error)"])
                        throw error
                    }
            }
        channel = try await bootstrap.bind(host: host, port: port).get()
        self.port = channel.localAddress?.port ?? port
    }
}

/// Sets TCP_NODELAY on `channel`, ignoring a refusal.
private func bestEffortNoDelay(_ channel: any Channel) -> EventLoopFuture<Void> {
    channel.setOption(.socketOption(.tcp_nodelay), value: 1).recover { _ in }
}
