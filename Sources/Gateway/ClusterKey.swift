import Foundation
import GatewayAPI
import KafkaClient
import SSLCrypto
import Synchronization

/// The cluster secret (`cluster.secretFile`, a Kubernetes Secret): what the replicas share and nobody else has.
/// It authenticates the two things one replica believes from another:
/// - a call forwarded to the owner of an app's partition (``signHop(_:)`` / ``verifyHop(_:)``): method, target,
///   body, `Authorization` and the original client's address, with a timestamp and a nonce (a signed call is
///   accepted once, within ``hopWindow`` of its time);
/// - a record of the members topic (``signMember(key:value:)``): where a replica answers and what it owns.
/// Without it a client could make a replica forward anywhere, and a writer of the members topic could send
/// users' tokens to an address of its choice. Each MAC is HMAC-SHA-256 over length-prefixed fields after a label
/// naming its use, so one kind of signed message is never taken for another.
///
/// Rotation: the secret file may hold several secrets, one per line. The first signs; every one verifies. Add the
/// new secret as a second line everywhere, then move it first, then remove the old one: no call is refused.
struct ClusterKey: Sendable {
    /// The signing secret first, then the others still accepted.
    private let secrets: [[UInt8]]
    private let nonces: NonceWindow
    /// How far a forwarded call's timestamp may be from this replica's clock (replica clocks must agree this well).
    static let hopWindow: Int64 = 60_000
    static let hopHeader = "x-push-hop"
    static let memberSignatureHeader = "pgw-sig"
    /// The shortest accepted secret.
    static let minimumBytes = 32

    init(secrets: [[UInt8]]) {
        self.secrets = secrets
        self.nonces = NonceWindow(windowMs: Self.hopWindow * 2, capacity: 500_000)
    }

    private func mac(_ label: String, _ fields: [[UInt8]], secret: [UInt8]) -> [UInt8] {
        var message = Array(label.utf8)
        for field in fields {
            withUnsafeBytes(of: UInt32(clamping: field.count).bigEndian) { message.append(contentsOf: $0) }
            message.append(contentsOf: field)
        }
        // HMAC fails only when OpenSSL cannot allocate: an empty MAC then never verifies.
        return (try? HMACSHA256.authenticationCode(for: message, key: secret)) ?? []
    }

    // MARK: Forwarded calls

    private func hopFields(_ call: ForwardedRequest, client: String, time: String, nonce: String) -> [[UInt8]] {
        var fields: [[UInt8]] = [Array(call.method.utf8), Array(call.pathAndQuery.utf8), Array(time.utf8), Array(nonce.utf8), Array(client.utf8)]
        // The one request header the API reads (libcurl adds others of its own, such as Accept).
        fields.append(Array(call.headers.filter { $0.name.lowercased() == "authorization" }.map(\.value).joined(separator: "\n").utf8))
        fields.append(SHA256.hash(call.body))
        return fields
    }

    /// The `x-push-hop` value for `call`, whose `x-push-client-address` header names the client.
    func signHop(_ call: ForwardedRequest, nowMs: Int64 = Self.wallClockMs()) -> String {
        let nonce = Base64URL.encode((try? SecureRandom.bytes(16)) ?? Array(UUID().uuidString.utf8))
        let time = String(nowMs)
        let client = call.header("x-push-client-address") ?? ""
        let signature = Base64URL.encode(
            mac("push-gateway hop v1", hopFields(call, client: client, time: time, nonce: nonce), secret: secrets[0]))
        return "v1;t=\(time);n=\(nonce);s=\(signature)"
    }

    /// Checks a forwarded call's `x-push-hop` header: signed with this secret, within the time window, never seen.
    /// A refusal's reason is a code: `unsigned`, `malformed`, `stale`, `bad_signature`, `replayed`.
    func verifyHop(_ call: ForwardedRequest, nowMs: Int64 = Self.wallClockMs()) -> HopVerdict {
        guard let header = call.header(Self.hopHeader) else { return .rejected(reason: "unsigned") }
        var fields: [String: String] = [:]
        for part in header.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
        }
        guard header.hasPrefix("v1;"), let time = fields["t"], let stamp = Int64(time), let nonce = fields["n"], nonce.utf8.count <= 64,
            let signature = fields["s"].flatMap({ Base64URL.decode($0) })
        else { return .rejected(reason: "malformed") }
        let (age, overflow) = nowMs.subtractingReportingOverflow(stamp)
        guard !overflow, age.magnitude <= UInt64(Self.hopWindow) else {
            // Replica clocks must agree within the window (docs/OPERATIONS.md).
            return .rejected(reason: "stale")
        }
        let client = call.header("x-push-client-address") ?? ""
        let signed = hopFields(call, client: client, time: time, nonce: nonce)
        guard secrets.contains(where: { constantTimeEquals(mac("push-gateway hop v1", signed, secret: $0), signature) }) else {
            return .rejected(reason: "bad_signature")
        }
        guard nonces.insert(nonce, atMs: nowMs) else { return .rejected(reason: "replayed") }
        return .authentic(client: client)
    }

    // MARK: Members records

    /// The `pgw-sig` header of a members-topic record.
    func signMember(key: [UInt8], value: [UInt8]) -> KafkaHeader {
        KafkaHeader(name: Self.memberSignatureHeader, value: mac("push-gateway member v1", [key, value], secret: secrets[0]))
    }

    func verifyMember(key: [UInt8], value: [UInt8], signature: [UInt8]?) -> Bool {
        guard let signature else { return false }
        return secrets.contains { constantTimeEquals(mac("push-gateway member v1", [key, value], secret: $0), signature) }
    }

    static func wallClockMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
}

/// Nonces seen within a time window, bounded in number (the oldest are forgotten first).
final class NonceWindow: Sendable {
    private struct State {
        var seen: Set<String> = []
        var order: [(nonce: String, atMs: Int64)] = []
        var head = 0
    }

    private let state = Mutex(State())
    private let windowMs: Int64
    private let capacity: Int

    init(windowMs: Int64, capacity: Int) {
        self.windowMs = windowMs
        self.capacity = capacity
    }

    /// False when `nonce` was seen within the window.
    func insert(_ nonce: String, atMs now: Int64) -> Bool {
        state.withLock { state in
            while state.head < state.order.count,
                state.order.count - state.head >= capacity || now.subtractingReportingOverflow(state.order[state.head].atMs).partialValue > windowMs
            {
                state.seen.remove(state.order[state.head].nonce)
                state.head += 1
            }
            if state.head > 4096, state.head * 2 > state.order.count {
                state.order.removeFirst(state.head)
                state.head = 0
            }
            guard state.seen.insert(nonce).inserted else { return false }
            state.order.append((nonce, now))
            return true
        }
    }
}
