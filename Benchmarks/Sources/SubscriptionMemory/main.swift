// Measures the memory held per subscription: N v1 subscriptions (realistic ~160-byte FCM tokens) spread over
// apps and paths; resident set size (/proc/self/statm) before and after.
//   swift run -c release SubscriptionMemory [count] [apps] [depth]
// depth 1: each device subscribes at its own node /users/{uid} (one trie node per subscription);
// depth 2: at /users/{uid}/inbox (two trie nodes per subscription, the worst common shape).
import Glibc
import PushCore

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 1_000_000 : 1_000_000
let appCount = CommandLine.arguments.count > 2 ? Int(CommandLine.arguments[2]) ?? 10_000 : 10_000
let depth = CommandLine.arguments.count > 3 ? Int(CommandLine.arguments[3]) ?? 1 : 1

func heapInUse() -> Int {
    guard let file = fopen("/proc/self/statm", "r") else { return 0 }
    defer { fclose(file) }
    var size = 0
    var resident = 0
    guard fscanf_pair(file, &size, &resident) else { return 0 }
    return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
}

func fscanf_pair(_ file: UnsafeMutablePointer<FILE>, _ a: inout Int, _ b: inout Int) -> Bool {
    var line = [CChar](repeating: 0, count: 256)
    guard fgets(&line, 256, file) != nil else { return false }
    let fields = String(cString: line).split(separator: " ")
    guard fields.count >= 2, let first = Int(fields[0]), let second = Int(fields[1]) else { return false }
    a = first
    b = second
    return true
}

let before = heapInUse()
var apps: [AppIndex] = (0..<appCount).map { AppIndex(app: "app\($0)") }
for index in 0..<count {
    let app = apps[index % appCount]
    let user = "u\(index / appCount)"
    let path = DataPath(validatedSegments: depth == 1 ? ["users", user] : ["users", user, "inbox"])
    let token = "fcm-" + String(index, radix: 16) + ":APA91b" + String(repeating: "x", count: 140)
    app.subscribe(
        path: path, subscriber: SubscriberKey(token: token), settings: SubscriptionSettings(mode: .value, expiresAt: 1_900_000_000))
}
let after = heapInUse()
let total = apps.reduce(0) { $0 + $1.subscriptionCount }
print("subscriptions: \(total) in \(appCount) apps, \(depth) trie node(s) of their own each")
print("resident memory: \((after - before) / 1_048_576) MiB, \((after - before) / max(total, 1)) bytes per subscription (token alone: ~\(150 + 16) bytes)")
withExtendedLifetime(apps) {}
print("layout: SubscriberKey \(MemoryLayout<SubscriberKey>.size) B, SubscriptionSettings \(MemoryLayout<SubscriptionSettings>.size) B, JSONValue? \(MemoryLayout<JSONValue?>.size) B")
