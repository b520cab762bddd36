import Providers
import Synchronization

/// Bounds the requests in flight to one provider project (one app's FCM project or HMS app): a slow or failing
/// project cannot take every HTTP/2 stream of the shared connections, and the excess waits here (in memory
/// bounded by `kafka.maxInFlightRecords`) rather than in libcurl.
struct LimitedSender: PushSender {
    let inner: any PushSender
    let limit: ConcurrencyLimit

    init(_ inner: any PushSender, maxInFlight: Int) {
        self.inner = inner
        self.limit = ConcurrencyLimit(maxInFlight)
    }

    var provider: String { inner.provider }
    var project: String { inner.project }

    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        await send(token: token, payload: payload, messageID: "", options: .none)
    }

    func send(token: String, payload: [UInt8], messageID: String, options: DeliveryOptions) async -> DeliveryOutcome {
        await limit.acquire()
        defer { limit.release() }
        return await inner.send(token: token, payload: payload, messageID: messageID, options: options)
    }
}
