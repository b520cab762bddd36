// A minimal, fast fake FCM for the end-to-end load test (Benchmarks/load-test.py).
//
//   swift run -c release --package-path Benchmarks LoadFakeFCM [PORT]      (0 or absent: any free port)
//
// Cleartext HTTP/2 with prior knowledge (h2c) on 127.0.0.1, one event-loop thread. Answers
//   POST /token                              → {"access_token":"…","expires_in":3600,"token_type":"Bearer"}
//   POST /v1/projects/{p}/messages:send      → 200 {"name":"projects/{p}/messages/N"}
//        (a query string is ignored: the load test's Web Push endpoints are that path with `?s=<k>`)
//   POST /3/device/{token}                   → 200, an `apns-id` header (APNs' success answer) and the body `{}`
//        (APNs sends none; see `respond` for why this one does)
//   anything else                            → 404
// Nothing is validated (the e2e suite's Python fake does that); this one only counts and measures.
//
// Each send body is searched for `ts\":` followed by digits: the produce time (ns since the epoch) the load
// generator puts in the published value, which reaches us JSON-escaped in `message.data.d` (FCM v1) or in a
// webhook's `"v":"ts\":N"`. A v2 data payload (`{"srv":"webcom","evt":"<unsecured JWS>","ver":"v2"}`, what an
// APNs subscription of the load test gets) carries the event base64url-encoded: its JWS payload is decoded and
// searched the same way. A Web Push body is encrypted: counted as a send without a timestamp (`no_ts`). Latency is
// now − ts (CLOCK_REALTIME in both processes).
//
// stdout, one JSON object per line:
//   {"port":N}                                                   once listening
//   {"t":unix_s,"sends":n,"p50_ms":…,"p99_ms":…,"max_ms":…}     every second (sends answered in that second)
//   {"window":true,"seconds":…,"sends":…,"rate":…,"p50_ms":…,"p90_ms":…,"p99_ms":…,"p999_ms":…,"max_ms":…}
//                                                                on the stdin line "report" (since "reset")
//   {"summary":true,"sends":…,"token_requests":…,"no_ts":…,"p50_ms":…,"p99_ms":…,…}
//                                                                on SIGTERM/SIGINT or stdin EOF, then exit 0
// stdin lines: "reset" starts a measurement window, "report" prints it.

import Dispatch
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func realtimeNanos() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// One line on stdout, written at once (no stdio buffering to flush).
func emit(_ line: String) {
    var text = line
    text.append("\n")
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(1, bytes.baseAddress! + offset, bytes.count - offset)
            if n <= 0 { break }
            offset += n
        }
    }
}

func ms(_ micros: UInt32) -> String {
    let v = Double(micros) / 1000
    return String(Double(Int((v * 1000).rounded())) / 1000)
}

/// Percentiles of latencies in µs (sorts in place).
func percentiles(_ values: inout [UInt32], _ qs: [Double]) -> [UInt32] {
    guard !values.isEmpty else { return qs.map { _ in 0 } }
    values.sort()
    return qs.map { q in  // nearest rank
        let rank = Int((q * Double(values.count)).rounded(.up))
        return values[min(values.count - 1, max(0, rank - 1))]
    }
}

/// All counters. Confined to the single event loop (every access is on it), hence `@unchecked Sendable`.
final class Stats: @unchecked Sendable {
    var secondLatencies: [UInt32] = []
    var secondSends = 0
    var windowLatencies: [UInt32] = []
    var windowSends = 0
    var windowStart = realtimeNanos()
    var allLatencies: [UInt32] = []
    var totalSends = 0
    var tokenRequests = 0
    var noTimestamp = 0
    var nextMessageID = 0
    let start = realtimeNanos()

    init() {
        secondLatencies.reserveCapacity(1 << 16)
        windowLatencies.reserveCapacity(1 << 20)
        allLatencies.reserveCapacity(1 << 22)
    }

    func recordSend(latencyNanos: Int64?) {
        secondSends += 1
        windowSends += 1
        totalSends += 1
        guard let latencyNanos else {
            noTimestamp += 1
            return
        }
        let micros = UInt32(clamping: max(0, latencyNanos) / 1000)
        secondLatencies.append(micros)
        windowLatencies.append(micros)
        allLatencies.append(micros)
    }

    func tick() {
        let p = percentiles(&secondLatencies, [0.5, 0.99, 1.0])
        let t = Double(realtimeNanos() / 1_000_000) / 1000
        emit(#"{"t":\#(t),"sends":\#(secondSends),"p50_ms":\#(ms(p[0])),"p99_ms":\#(ms(p[1])),"max_ms":\#(ms(p[2]))}"#)
        secondSends = 0
        secondLatencies.removeAll(keepingCapacity: true)
    }

    func resetWindow() {
        windowSends = 0
        windowLatencies.removeAll(keepingCapacity: true)
        windowStart = realtimeNanos()
    }

    func reportWindow() {
        let seconds = Double(realtimeNanos() - windowStart) / 1e9
        let p = percentiles(&windowLatencies, [0.5, 0.9, 0.99, 0.999, 1.0])
        let rate = seconds > 0 ? Double(windowSends) / seconds : 0
        emit(#"{"window":true,"seconds":\#(seconds),"sends":\#(windowSends),"rate":\#(Int(rate.rounded())),"p50_ms":\#(ms(p[0])),"p90_ms":\#(ms(p[1])),"p99_ms":\#(ms(p[2])),"p999_ms":\#(ms(p[3])),"max_ms":\#(ms(p[4]))}"#)
    }

    func summary() {
        let p = percentiles(&allLatencies, [0.5, 0.99, 1.0])
        let seconds = Double(realtimeNanos() - start) / 1e9
        emit(#"{"summary":true,"seconds":\#(seconds),"sends":\#(totalSends),"token_requests":\#(tokenRequests),"no_ts":\#(noTimestamp),"p50_ms":\#(ms(p[0])),"p99_ms":\#(ms(p[1])),"max_ms":\#(ms(p[2]))}"#)
    }
}

/// `ts\":` then digits, anywhere in the body → that number; else the same in the payload of the unsecured JWS
/// `evt` of a v2 data payload.
func extractTimestamp(_ body: ByteBuffer) -> Int64? {
    body.withUnsafeReadableBytes { raw -> Int64? in
        let bytes = raw.bindMemory(to: UInt8.self)
        if let ts = findTimestamp(bytes) { return ts }
        guard let event = unsecuredEvent(bytes) else { return nil }
        return event.withUnsafeBufferPointer(findTimestamp)
    }
}

/// The decoded payload of `"evt":"<header>.<payload>.` in `bytes` (an unsecured JWS, base64url), nil if none.
func unsecuredEvent(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
    let marker = Array(#""evt":""#.utf8)
    let n = bytes.count
    var i = 0
    while i + marker.count <= n {
        if bytes[i] == marker[0] && bytes[i..<(i + marker.count)].elementsEqual(marker) { break }
        i += 1
    }
    guard i + marker.count <= n else { return nil }
    var j = i + marker.count
    while j < n, bytes[j] != 0x2E, bytes[j] != 0x22 { j += 1 }  // past the header, to "."
    guard j < n, bytes[j] == 0x2E else { return nil }
    j += 1
    var out: [UInt8] = []
    out.reserveCapacity(n)
    var accumulator: UInt32 = 0
    var bits = 0
    while j < n {
        let c = bytes[j]
        let v: UInt32
        switch c {
        case 0x41...0x5A: v = UInt32(c - 0x41)
        case 0x61...0x7A: v = UInt32(c - 0x61 + 26)
        case 0x30...0x39: v = UInt32(c - 0x30 + 52)
        case 0x2D: v = 62  // -
        case 0x5F: v = 63  // _
        default: return out  // "." or the closing quote
        }
        accumulator = (accumulator << 6) | v
        bits += 6
        if bits >= 8 {
            bits -= 8
            out.append(UInt8((accumulator >> UInt32(bits)) & 0xFF))
        }
        j += 1
    }
    return out
}

func findTimestamp(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
    let needle: [UInt8] = [0x74, 0x73, 0x5C, 0x22, 0x3A]  // t s \ " :
    let n = bytes.count
    var i = 0
    while i + needle.count <= n {
        if bytes[i] == 0x74 && bytes[i + 1] == 0x73 && bytes[i + 2] == 0x5C && bytes[i + 3] == 0x22
            && bytes[i + 4] == 0x3A
        {
            var j = i + needle.count
            var value: Int64 = 0
            var digits = 0
            while j < n, bytes[j] >= 0x30, bytes[j] <= 0x39, digits < 19 {
                value = value * 10 + Int64(bytes[j] - 0x30)
                j += 1
                digits += 1
            }
            return digits > 0 ? value : nil
        }
        i += 1
    }
    return nil
}

let tokenBody = #"{"access_token":"ya29.load-fake","expires_in":3600,"token_type":"Bearer"}"#

/// One HTTP/2 stream: the request's HEADERS (`:path`) and DATA frames, answered with HEADERS + one DATA frame
/// (END_STREAM). Works on frame payloads directly (no HTTP/1 translation: cheaper).
final class StreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    let stats: Stats
    var path = ""
    var body: ByteBuffer?
    var answered = false

    init(stats: Stats) { self.stats = stats }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let headers):
            if let value = headers.headers.first(name: ":path") { path = value }
            if headers.endStream { respond(context: context) }
        case .data(let frame):
            if case .byteBuffer(var part) = frame.data {
                if body == nil { body = part } else { body!.writeBuffer(&part) }
            }
            if frame.endStream { respond(context: context) }
        default:
            break
        }
    }

    private func respond(context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        let status: String
        let text: String
        let route = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? path
        if route.hasPrefix("/3/device/") {
            // APNs: 200 with an apns-id. Not APNs' empty body: behind nghttpx 1.52 (Debian 12's, the load test's TLS
            // front), empty-bodied answers (HEADERS with END_STREAM, or an empty DATA frame) make nghttpx end the
            // client's connection with GOAWAY INTERNAL_ERROR after about 1,000 streams, and requests in flight on it
            // fail (libcurl: "Send failure: Broken pipe"); reproduced with the curl CLI, no gateway involved. The
            // gateway reads nothing of a 200's body.
            let ts = body.flatMap(extractTimestamp)
            stats.recordSend(latencyNanos: ts.map { realtimeNanos() - $0 })
            stats.nextMessageID += 1
            let id = String(stats.nextMessageID)
            let apnsID = "00000000-0000-4000-8000-" + String(repeating: "0", count: max(0, 12 - id.count)) + id
            status = "200"
            text = "{}"
            var buffer = context.channel.allocator.buffer(capacity: 2)
            buffer.writeString(text)
            let headers = HPACKHeaders([(":status", status), ("apns-id", apnsID), ("content-length", "2")])
            context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
            body = nil
            return
        } else if route.hasSuffix("messages:send") {
            let ts = body.flatMap(extractTimestamp)
            stats.recordSend(latencyNanos: ts.map { realtimeNanos() - $0 })
            stats.nextMessageID += 1
            var project = "p"
            let parts = route.split(separator: "/")
            if let i = parts.firstIndex(of: "projects"), i + 1 < parts.count { project = String(parts[i + 1]) }
            status = "200"
            text = #"{"name":"projects/\#(project)/messages/\#(stats.nextMessageID)"}"#
        } else if path.hasPrefix("/token") {
            stats.tokenRequests += 1
            status = "200"
            text = tokenBody
        } else {
            status = "404"
            text = #"{"error":{"code":404,"message":"not found","status":"NOT_FOUND"}}"#
        }
        var buffer = context.channel.allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        let headers = HPACKHeaders([
            (":status", status), ("content-type", "application/json; charset=UTF-8"),
            ("content-length", String(buffer.readableBytes)),
        ])
        context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
        body = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

// ---- main ----

let requestedPort = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 0 : 0
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let loop = group.next()
let stats = Stats()

let bootstrap = ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 256)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        channel.configureHTTP2Pipeline(
            mode: .server,
            initialLocalSettings: [
                HTTP2Setting(parameter: .maxConcurrentStreams, value: 10_000),
                HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
            ],
            targetWindowSize: 1 << 24,
            inboundStreamInitializer: { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(StreamHandler(stats: stats))
            }
        }).map { _ in }
    }

let server: Channel
do {
    server = try bootstrap.bind(host: "127.0.0.1", port: requestedPort).wait()
} catch {
    emit(#"{"error":"bind failed: \#(error)"}"#)
    exit(1)
}
emit(#"{"port":\#(server.localAddress?.port ?? 0)}"#)

loop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { _ in stats.tick() }

@Sendable func finish() {
    loop.execute {
        stats.tick()
        stats.summary()
        exit(0)
    }
}

signal(SIGTERM, SIG_IGN)
signal(SIGINT, SIG_IGN)
let signalQueue = DispatchQueue(label: "signals")
let termSource = DispatchSource.makeSignalSource(signal: SIGTERM, queue: signalQueue)
termSource.setEventHandler { finish() }
termSource.resume()
let intSource = DispatchSource.makeSignalSource(signal: SIGINT, queue: signalQueue)
intSource.setEventHandler { finish() }
intSource.resume()

DispatchQueue.global().async {
    while let line = readLine() {
        switch line.trimmingCharacters() {
        case "reset": loop.execute { stats.resetWindow() }
        case "report": loop.execute { stats.reportWindow() }
        default: break
        }
    }
    finish()
}

extension String {
    func trimmingCharacters() -> String {
        String(self.drop { $0 == " " || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\r" }.reversed())
    }
}

try server.closeFuture.wait()
