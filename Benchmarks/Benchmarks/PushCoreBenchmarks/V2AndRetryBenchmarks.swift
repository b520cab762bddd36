import Benchmark
import JOSE
import PushCore
import PushFormats

/// A 2048-bit RSA public key (SubjectPublicKeyInfo), generated once with Python's `cryptography` for these
/// benchmarks; its private part was thrown away.
let rsa2048PublicKeyPEM = """
-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAsBhs8kbxhn18kBvUMau8
9xq7Vrq4+5fCK9tHLngzRSoZ4L9WBcuBUMQeU2Ph6jBUmFPvcuwxDl30hkPgYw7w
I8cmwV0YOM6W1DHeyBBZLyT/RZA5kWxpZ+CX5YhsdvSWbUYgL2QHsSezCj5DxBMk
o1SuFEl0YGsbj+D5+Yxbz/680MNvOaEXUIgj2vf1+jzyUACp3bvjNT22weedf+EN
Ko74dxJr4g71QBlyzT1yvfCDryR2nGDHPoypUN/xrbneRJMF8v8fvEAiN86HPPDi
Jnl0eyAiY0uOVwAN0gSXEsBPb2B+8dLFuu+vs5yVcDBrMuoS3eJQ3SAn48p++Ia+
xQIDAQAB
-----END PUBLIC KEY-----
"""

/// A 100-byte event value (compact JSON).
let hundredByteValueJSON = #"{"text":"hello world, see you there","from":"u7","at":1700000000000,"tags":["a","b"],"n":{"k":"v1"}}"#

/// The v2 payload builds: unsecured JWS and the three JWE key-management algorithms, all with A256GCM.
func v2PayloadBenchmarks() {
    let value = (try? JSONParser.parse(hundredByteValueJSON)) ?? .null
    precondition(JSONWriter.bytes(value).count == 100, "the value must be 100 bytes")
    let path = DataPath(validatedSegments: ["users", "u42", "inbox"])
    let subscriptionID = "sub-" + String(repeating: "0123456789abcdef", count: 2)
    let secret = (0..<32).map { (byte: Int) in UInt8(truncatingIfNeeded: byte &* 37 &+ 11) }

    // SSLCrypto is not a product of the main package: the RSA public key is loaded through PushFormats'
    // encryption settings, which call `RSAPublicKey(pem:)` and `JWEKey.rsaOAEP256(kid:publicKey:)`.
    let rsaKey: JWEKey
    do {
        let settings = JSONValue.object([
            "active": .string("k3"),
            "keys": .array([
                .object([
                    "kty": .string("RSA"), "kid": .string("k3"), "alg": .string("RSA-OAEP-256"),
                    "publicKeyPEM": .string(rsa2048PublicKeyPEM),
                ])
            ]),
        ])
        guard let key = try AppEncryptionKeys.parse(settings).active else { fatalError("no active RSA key") }
        rsaKey = key
    } catch {
        fatalError("RSA key: \(error)")
    }
    precondition(rsaKey.encryptedKeyByteCount == 256, "expected a 2048-bit RSA key")

    let cases: [(String, JWEKey?)] = [
        ("v2 payload: unsecured JWS (value, 100-byte value)", nil),
        ("v2 payload: JWE dir + A256GCM", try! JWEKey.dir(kid: "k1", key: secret)),
        ("v2 payload: JWE A256KW + A256GCM", try! JWEKey.a256kw(kid: "k2", kek: secret)),
        ("v2 payload: JWE RSA-OAEP-256 (2048-bit) + A256GCM", rsaKey),
    ]
    for (name, key) in cases {
        // Sanity check outside the measurement: the payload is built in full (no degraded form).
        guard let sample = try? V2Payload.build(
            app: "toto", path: path, subscriptionID: subscriptionID, content: .value(value), key: key)
        else { fatalError("\(name): no payload") }
        precondition(sample.jsonBytes().count > 100)

        Benchmark(name) { benchmark in
            for _ in benchmark.scaledIterations {
                let payload = try V2Payload.build(
                    app: "toto", path: path, subscriptionID: subscriptionID, content: .value(value), key: key)
                blackHole(payload?.jsonBytes())
            }
        }
    }
}

/// The retry queue's hot path and the encoding of a retry record.
func retryBenchmarks() {
    let value = (try? JSONParser.parse(hundredByteValueJSON)) ?? .null

    // 10,000 subscriptions each with one pending notification backing off until far in the future.
    let queue = DeliveryQueue()
    for subscription in 0..<10_000 {
        queue.enqueue(
            PendingNotification(
                app: "app\(subscription % 100)", path: DataPath(validatedSegments: ["users", "u\(subscription)", "inbox"].map { ExactString($0) }),
                subscriber: SubscriberKey(token: token(subscription)), format: .v1, content: .value(value),
                scope: "fcm:project", origin: "event-\(subscription)", firstFailureAt: 1_000, attempt: 1,
                notBefore: 1_000_000))
    }
    precondition(queue.subscriptionCount == 10_000)
    // Notifications for subscriptions with nothing pending, due at once (notBefore 0); each is gone again
    // (completed) before it is reused.
    let fresh: [PendingNotification] = (0..<1_024).map { number in
        PendingNotification(
            app: "app7", path: DataPath(validatedSegments: ["users", "fresh\(number)", "inbox"].map { ExactString($0) }),
            subscriber: SubscriberKey(token: token(1_000_000 + number)), format: .v1, content: .value(value),
            scope: "fcm:project", origin: "event-fresh-\(number)", firstFailureAt: 0)
    }
    Benchmark("retry queue: enqueue + due + completed (10k pending subscriptions)") { benchmark in
        var handedOut = 0
        for round in benchmark.scaledIterations {
            let notification = fresh[round % fresh.count]
            queue.enqueue(notification)
            let due = queue.due(now: 1, limit: 1)
            handedOut &+= due.count
            queue.completed(notification.key)
        }
        blackHole(handedOut)
        precondition(queue.count == 10_000 && queue.inFlightCount == 0)
    }

    // The same steps with the notification made in the loop, as the lanes do per match (its key hashed, its fields
    // retained): a change to the notification's layout shows here with its cost of making it.
    let parts: [(path: DataPath, subscriber: SubscriberKey)] = fresh.map { ($0.path, $0.subscriber) }
    Benchmark("retry queue: make + enqueue + due + completed (10k pending subscriptions)") { benchmark in
        var handedOut = 0
        for round in benchmark.scaledIterations {
            let part = parts[round % parts.count]
            let notification = PendingNotification(
                app: "app7", path: part.path, subscriber: part.subscriber, format: .v1, content: .value(value),
                scope: "fcm:project", origin: "event-fresh", firstFailureAt: 0)
            queue.enqueue(notification)
            let due = queue.due(now: 1, limit: 1)
            handedOut &+= due.count
            queue.completed(notification.key)
        }
        blackHole(handedOut)
        precondition(queue.count == 10_000 && queue.inFlightCount == 0)
    }

    // A backlog: 1,000 subscriptions with 200 notifications queued each, delivered one by one (each line's head
    // leaves 200 times). With the line in an array every delivery moved the entries behind the head.
    let backlog: [PendingNotification] = (0..<1_000).flatMap { subscription in
        (0..<200).map { number in
            PendingNotification(
                app: "app\(subscription % 10)", path: DataPath(validatedSegments: ["users", "b\(subscription)"].map { ExactString($0) }),
                subscriber: SubscriberKey(token: token(2_000_000 + subscription)), format: .v1, content: .value(value),
                scope: "fcm:project", origin: "event-\(number)", firstFailureAt: 0)
        }
    }
    Benchmark(
        "retry queue: drain 1,000 lines of 200 (backlog)",
        configuration: .init(maxDuration: .seconds(10), maxIterations: 20)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            let drained = DeliveryQueue()
            for notification in backlog { drained.enqueue(notification) }
            var delivered = 0
            while drained.count > 0 {
                let due = drained.due(now: 1, limit: 2_000)
                for head in due { drained.completed(head.key) }
                delivered &+= due.count
            }
            blackHole(delivered)
        }
    }

    // A project's pace and its in-flight limit bind in turn (the provider slows down, then the quota binds), with
    // 50,000 lines waiting: 8,000 hand-outs, the binding admission changing every 1,000 turns. Before issue 19's
    // change each change moved every waiting line from one admission's heap to the other (125-145 ms a time).
    let waitingLines: [PendingNotification] = (0..<50_000).map { subscription in
        PendingNotification(
            app: "app1", path: DataPath(validatedSegments: ["p\(subscription % 100)"].map { ExactString($0) }),
            subscriber: SubscriberKey(token: token(3_000_000 + subscription)), format: .v1, content: .value(value),
            scope: "fcm:p", origin: "event", firstFailureAt: 0)
    }
    let bothBind: [DeliveryQueue.Admission] = [
        .rate(DeliveryQueue.Pace(key: "fcm:p", rate: 1_000, burst: 10)), .concurrency(DeliveryQueue.Gate(key: "fcm:p", limit: 10)),
    ]
    Benchmark(
        "retry queue: pace and in-flight limit bind in turn, 50,000 waiting (8,000 hand-outs)",
        configuration: .init(maxDuration: .seconds(20), maxIterations: 5)
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            let paced = DeliveryQueue(admissions: { _ in bothBind })
            for notification in waitingLines { paced.enqueue(notification) }
            var (now, turns, handedOut) = (1.0, 0, 0)
            var inFlight: [RetryKey] = []
            while handedOut < 8_000 {
                // 0.5 ms a turn, tokens at 1,000/s; a head completes each turn, then every 4th turn, in turns.
                now += 0.000_5
                turns += 1
                if turns % ((turns / 1_000) % 2 == 0 ? 1 : 4) == 0, !inFlight.isEmpty { paced.completed(inFlight.removeFirst()) }
                let due = paced.due(now: now, limit: 1_000)
                handedOut += due.count
                inFlight += due.map(\.key)
            }
            blackHole(turns)
        }
    }

    // One subscription's line of 3 pending notifications (v2 value mode: the first one retried twice).
    let key = RetryKey(
        app: "toto", path: DataPath(validatedSegments: ["users", "u42", "inbox"]),
        subscriber: SubscriberKey(token: token(42), uid: "user-42"))
    let entries = (0..<3).map { number in
        PendingNotification(
            app: key.app, path: key.path, subscriber: key.subscriber, format: .v2, content: .value(value),
            scope: "fcm:project", origin: "01HZX3K5Q9V7-event-\(number)", firstFailureAt: 1_767_225_600.5,
            attempt: number == 0 ? 2 : 0, notBefore: 1_767_225_604.125)
    }
    Benchmark("retry record: encode a line of 3 pending notifications") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(RetryRecord(key: key, entries: entries).value)
        }
    }

    // A state record as the gateway writes it (issue 19: 1,000,000 of them at start-up), decoded by the load's
    // fast path and by the JSON decoder it falls back to.
    let stateRecord = SubscriptionRecord(
        app: "app7", subscription: Subscription(
            path: DataPath(validatedSegments: ["users", "u42"]), subscriber: SubscriberKey(token: token(42)),
            settings: SubscriptionSettings(mode: .noData, expiresAt: 1_900_000_000)))
    let stateKey = stateRecord.key
    let stateValue = stateRecord.value ?? []
    Benchmark("state record: decode a subscription (load's fast path)") { benchmark in
        stateKey.withUnsafeBufferPointer { key in
            stateValue.withUnsafeBufferPointer { value in
                for _ in benchmark.scaledIterations { blackHole(try? StateRecord.decode(key: key, value: value)) }
            }
        }
    }
    Benchmark("state record: decode a subscription (JSON decoder)") { benchmark in
        stateKey.withUnsafeBufferPointer { key in
            stateValue.withUnsafeBufferPointer { value in
                for _ in benchmark.scaledIterations { blackHole(try? SubscriptionRecord.decodeParsingJSON(key: key, value: value)) }
            }
        }
    }
}
