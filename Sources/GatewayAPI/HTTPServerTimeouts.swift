import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1

/// The HTTP/1.1 server with the gateway's connection timeouts (issue 17, finding 7):
/// - an idle timeout (`http.idleTimeoutMs`): a connection with no request in progress is closed (Hummingbird's);
/// - a read deadline (`http.readTimeoutMs`): a request must be received whole, head and body, within the
///   deadline from its first byte; else the connection gets `408` (unless an answer was already sent) and is
///   closed. A slow-loris sending a byte every few seconds, or a half-sent body, holds a connection for the
///   deadline at most, whatever Hummingbird's idle timer (which every body part resets) says.
public enum GatewayHTTPServer {
    public static func builder(idleTimeout: Duration, readTimeout: Duration) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            ReadDeadlineChannel(
                inner: HTTP1Channel(
                    responder: responder,
                    configuration: .init(additionalChannelHandlers: [RequestEndObserver()], idleTimeout: TimeAmount(idleTimeout))),
                readTimeout: TimeAmount(readTimeout))
        }
    }
}

/// Hummingbird's HTTP/1 child channel with ``RequestDeadlineHandler`` first in the pipeline (it must see the
/// bytes of a head that never completes, before the HTTP decoder).
struct ReadDeadlineChannel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let inner: HTTP1Channel
    let readTimeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(RequestDeadlineHandler(timeout: readTimeout), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger).flatMapThrowing { value in
            // Right after the HTTP decoder, where the request target is still the one the client sent.
            let decoder = try channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try channel.pipeline.syncOperations.addHandler(OriginFormHandler(), position: .after(decoder))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await inner.handle(value: value, logger: logger)
    }
}

/// Closes a connection whose request is not received whole within `timeout` of its first byte. Bytes arriving
/// while no request is being read start the deadline; the end of the request (``RequestEndObserver``) stops it.
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?
    private var reading = false
    private var answered = false

    init(timeout: TimeAmount) { self.timeout = timeout }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !reading { start(context) }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        answered = true
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { stop() }

    /// A request head was decoded (a pipelined request's bytes may have come with the previous one's).
    func requestStarted(_ context: ChannelHandlerContext) {
        if !reading { start(context) }
    }

    /// The request was received whole.
    func requestEnded() { stop() }

    private func start(_ context: ChannelHandlerContext) {
        reading = true
        answered = false
        deadline?.cancel()
        let loop = context.eventLoop.assumeIsolatedUnsafeUnchecked()
        deadline = loop.scheduleTask(in: timeout) { [self] in expired(context) }
    }

    private func stop() {
        reading = false
        deadline?.cancel()
        deadline = nil
    }

    private func expired(_ context: ChannelHandlerContext) {
        deadline = nil
        guard reading else { return }
        reading = false
        guard context.channel.isActive else { return }
        if !answered {
            let body = #"{"status":"request_timeout","message":"the request was not received whole within "#
                + "\(timeout.nanoseconds / 1_000_000) ms\"}"
            let head =
                "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: \(body.utf8.count)\r\nconnection: close\r\n\r\n"
            var buffer = context.channel.allocator.buffer(capacity: head.utf8.count + body.utf8.count)
            buffer.writeString(head)
            buffer.writeString(body)
            context.writeAndFlush(wrapOutboundOut(.byteBuffer(buffer))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        } else {
            context.close(promise: nil)
        }
    }
}

/// Tells the connection's ``RequestDeadlineHandler`` when a request head is decoded and when the request is
/// over (after the HTTP decoder, among Hummingbird's additional channel handlers).
final class RequestEndObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP1Channel.Value.InboundPart
    typealias InboundOut = HTTP1Channel.Value.InboundPart

    private var deadline: RequestDeadlineHandler?
    private var deadlineContext: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        deadline = try? context.pipeline.syncOperations.handler(type: RequestDeadlineHandler.self)
        deadlineContext = try? context.pipeline.syncOperations.context(handlerType: RequestDeadlineHandler.self)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline = nil
        deadlineContext = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: if let deadline, let deadlineContext { deadline.requestStarted(deadlineContext) }
        case .body: break
        case .end: deadline?.requestEnded()
        }
        context.fireChannelRead(data)
    }
}

/// Names the request part type of Hummingbird's HTTP/1 channel (`HTTPRequestPart`, of a module this target does
/// not import).
protocol AsyncChannelParts {
    associatedtype InboundPart
}

extension NIOAsyncChannel: AsyncChannelParts {
    typealias InboundPart = Inbound
}
