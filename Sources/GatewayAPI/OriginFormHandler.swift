import NIOCore
import NIOHTTP1

/// Refuses, with `400`, every request whose target is not a path (origin-form, RFC 9112 §3.2.1): absolute-form
/// (`http://host/path`), authority-form (`host:port`) or anything else a client may write. The API is not a
/// proxy: the host of an absolute-form target would be ignored further on (the server keeps only its path), but
/// a target that names another host is refused outright, before any route or forwarding sees it (issue 17,
/// finding 1). `OPTIONS *` is taken (asterisk-form). Placed right after the HTTP decoder, where the target is still
/// the one the client sent; the refused request's body is dropped and the connection closed.
final class OriginFormHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private var refusing = false

    static func isOriginForm(_ head: HTTPRequestHead) -> Bool {
        if head.method == .OPTIONS, head.uri == "*" { return true }
        return head.uri.utf8.first == UInt8(ascii: "/") && !head.uri.utf8.starts(with: "//".utf8)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            guard !Self.isOriginForm(head) else {
                refusing = false
                return context.fireChannelRead(data)
            }
            refusing = true
            refuse(context, version: head.version)
        case .body, .end:
            if !refusing { context.fireChannelRead(data) }
        }
    }

    private func refuse(_ context: ChannelHandlerContext, version: HTTPVersion) {
        let body = #"{"status":"bad_request","message":"the request target must be a path starting with a single '/' (origin-form)"}"#
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: "application/json")
        headers.add(name: "content-length", value: String(body.utf8.count))
        headers.add(name: "connection", value: "close")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: version, status: .badRequest, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(string: body)))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
}
