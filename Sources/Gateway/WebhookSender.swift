import Providers
import PushCore
import SSLCrypto
import Synchronization

/// The sender of an app's `kind: "webhook"` subscriptions: the subscriber's token holds the destination and the
/// context (``SubscriberKey/webhook(destination:context:uid:)``), the payload is the request body
/// (``PayloadBuilder``), and the message id is the `webhook-id`. At most `maxInFlightPerHost` requests go to one
/// destination host at a time (``HostLimits``).
final class WebhookSender: PushSender {
    let client: WebhookClient
    let hosts: HostLimits
    var provider: String { "webhook" }
    let project: String

    init(app: String, client: WebhookClient, maxInFlightPerHost: Int) {
        self.client = client
        self.hosts = HostLimits(perHost: maxInFlightPerHost)
        self.project = "webhook:" + app
    }

    /// The `webhook-id` of a notification: `msg_` and 22 characters of a hash of what caused it (the change
    /// event's id) and of its body (which names the subscription). Every attempt of one message, on any replica,
    /// has the same id; a redelivery after a crash too, so receivers can drop duplicates by it. (Two identical
    /// bodies caused by events published without an `event_id` share one.)
    static func messageID(origin: String, body: [UInt8]) -> String {
        var material = Array("pushgateway-webhook-message".utf8)
        let originBytes = Array(origin.utf8)
        let count = UInt32(truncatingIfNeeded: originBytes.count)
        material.append(contentsOf: [UInt8(count >> 24), UInt8((count >> 16) & 0xFF), UInt8((count >> 8) & 0xFF), UInt8(count & 0xFF)])
        material.append(contentsOf: originBytes)
        material.append(contentsOf: body)
        return "msg_" + Base64URL.encode(SHA256.hash(material).prefix(16))
    }

    func send(token: String, payload: [UInt8]) async -> DeliveryOutcome {
        await send(token: token, payload: payload, messageID: "msg_unidentified")
    }

    func send(token: String, payload: [UInt8], messageID: String) async -> DeliveryOutcome {
        let subscriber = SubscriberKey(kind: .webhook, token: token)
        let destination = String(subscriber.destination)
        let host = (try? WebhookURL(destination))?.host ?? ""
        await hosts.acquire(host)
        defer { hosts.release(host) }
        return await client.send(destination: destination, messageID: messageID, body: payload)
    }
}

/// At most `perHost` holders per host name, the others waiting in FIFO order. An idle host takes no memory.
final class HostLimits: Sendable {
    private struct Host {
        var inFlight = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let hosts = Mutex<[String: Host]>([:])
    let perHost: Int

    init(perHost: Int) { self.perHost = max(1, perHost) }

    func acquire(_ host: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = hosts.withLock { hosts -> Bool in
                var entry = hosts[host, default: Host()]
                defer { hosts[host] = entry }
                if entry.inFlight < perHost {
                    entry.inFlight += 1
                    return true
                }
                entry.waiters.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release(_ host: String) {
        let next = hosts.withLock { hosts -> CheckedContinuation<Void, Never>? in
            guard var entry = hosts[host] else { return nil }
            if entry.waiters.isEmpty {
                entry.inFlight -= 1
                hosts[host] = entry.inFlight > 0 ? entry : nil
                return nil
            }
            let next = entry.waiters.removeFirst()
            hosts[host] = entry
            return next
        }
        next?.resume()
    }

    /// Requests in flight to `host` (tests).
    func inFlight(_ host: String) -> Int { hosts.withLock { $0[host]?.inFlight ?? 0 } }
}
