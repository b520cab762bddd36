import Benchmark
import PushCore

/// A realistic FCM registration token (they are ~160 characters).
func token(_ index: Int) -> String {
    "fcm-" + String(index, radix: 16) + ":APA91b" + String(repeating: "x", count: 140)
}

/// 10,000 apps × 100 subscriptions = 1,000,000 subscriptions, each app with paths /users/u{i}/inbox.
func makeApps(count: Int, perApp: Int) -> [AppIndex] {
    (0..<count).map { appNumber in
        let index = AppIndex(app: "app\(appNumber)")
        for subscription in 0..<perApp {
            let path = DataPath(validatedSegments: ["users", "u\(subscription)", "inbox"].map { ExactString($0) })
            let mode: SubscriptionMode = subscription % 3 == 0 ? .noData : (subscription % 3 == 1 ? .value : .childEvent)
            index.subscribe(
                path: path, subscriber: SubscriberKey(token: token(appNumber * perApp + subscription)),
                settings: SubscriptionSettings(mode: mode, expiresAt: .max))
        }
        return index
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .throughput, .mallocCountTotal], maxDuration: .seconds(3))

    // One app among 10,000 receives a write on one user's inbox: matching touches only that path.
    let apps = makeApps(count: 10_000, perApp: 100)
    let events: [ChangeEvent] = (0..<100).map { user in
        ChangeEvent(
            app: "app42", path: DataPath(validatedSegments: ["users", "u\(user)", "inbox", "m1"].map { ExactString($0) }), operation: .set,
            after: .object(["text": .string("hello"), "from": .string("u7")]))
    }
    Benchmark("match: write below a subscription, 1M subscriptions in 10k apps") { benchmark in
        var total = 0
        for round in benchmark.scaledIterations {
            let event = events[round % events.count]
            total &+= apps[42].apply(event, now: 0).count
        }
        blackHole(total)
    }

    // A single app holding 1,000,000 subscriptions: a write off most paths costs the same.
    let big = AppIndex(app: "big")
    for subscription in 0..<1_000_000 {
        big.subscribe(
            path: DataPath(validatedSegments: ["users", "u\(subscription)"].map { ExactString($0) }), subscriber: SubscriberKey(token: token(subscription)),
            settings: SubscriptionSettings(mode: .noData, expiresAt: .max))
    }
    let single = ChangeEvent(app: "big", path: DataPath(validatedSegments: ["users", "u123456", "x"]), operation: .set, after: .number("1"))
    Benchmark("match: write in an app of 1M subscriptions") { benchmark in
        var total = 0
        for _ in benchmark.scaledIterations { total &+= big.apply(single, now: 0).count }
        blackHole(total)
    }

    let value = (try? JSONParser.parse(#"{"a":"WGj2WtQWVEjQGhQqb7r678xW3PwWmB4Z3zj","n":{"x":1,"y":[1,2,3]},"t":true}"#)) ?? .null
    let path = DataPath(validatedSegments: ["some", "webcom", "path"])
    Benchmark("payload: v1 value") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(V1Payload.build(app: "toto", path: path, content: .value(value))?.jsonBytes())
        }
    }

    var children: [ExactString: JSONValue] = [:]
    for child in 0..<20 { children[ExactString("child\(child)")] = .object(["v": .number(String(child)), "s": .string("text \(child)")]) }
    let old = JSONValue.object(children)
    var updated = children
    updated["child3"] = .string("changed")
    updated["child21"] = .bool(true)
    updated["child7"] = nil
    let new = JSONValue.object(updated)
    Benchmark("payload: v1 childEvent (diff of 20 children + build)") { benchmark in
        for _ in benchmark.scaledIterations {
            let changes = ChildChanges.between(old: old, new: new)
            blackHole(V1Payload.build(app: "toto", path: path, content: .childEvent(changes, keysOnly: false))?.jsonBytes())
        }
    }

    let eventJSON = #"{"text":"hello world","from":"u7","at":1700000000000,"tags":["a","b"],"nested":{"k":"v"}}"#
    Benchmark("json: parse a 100-byte event value") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try? JSONParser.parse(eventJSON)) }
    }

    v2PayloadBenchmarks()
    deviceEncryptionBenchmarks()
    webPushBenchmarks()
    retryBenchmarks()
}
