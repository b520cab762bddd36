// Measures the memory held per subscription, and compares it with the index's own estimate
// (`AppIndex.byteCount`, which the byte budgets use): N v1 subscriptions spread over apps and paths; resident
// set size (/proc/self/statm) before and after.
//   swift run -c release SubscriptionMemory [count] [apps] [shape]
// shape 1: each device subscribes at its own node /users/{uid} (one trie node per subscription, ~160-byte FCM
//          tokens);
// shape 2: at /users/{uid}/inbox (two trie nodes per subscription, the worst common shape);
// shape v2: v2 subscriptions, one per user (uid "user-{n}", the auth uid the same), at /users/{uid}/inbox: the
//          case where a uid is shared by nothing else;
// shape v2x3: v2, three per user from one device (inbox, settings, feed);
// shape seeded1, seeded2: shapes 1 and 2 with every node's shadow seeded: a number (`seeded1`, held inline in the
//          JSON value) or a small object (`seeded2`, {"unread": 3, "last": "<16 bytes>"}): what a shadow costs
//          beyond its JSON;
// shape long: anonymous abuse (issue 17, finding 4): a 2 KB path and a 1 KB device id per subscription, each
//          invented (nothing shared).
import Glibc
import PushCore

let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 1_000_000 : 1_000_000
let appCount = CommandLine.arguments.count > 2 ? Int(CommandLine.arguments[2]) ?? 10_000 : 10_000
let shape = CommandLine.arguments.count > 3 ? CommandLine.arguments[3] : "1"

func residentBytes() -> Int {
    guard let file = fopen("/proc/self/statm", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    guard fgets(&line, 256, file) != nil else { return 0 }
    let fields = String(cString: line).split(separator: " ")
    guard fields.count >= 2, let resident = Int(fields[1]) else { return 0 }
    return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
}

let long = String(repeating: "p", count: 2000)
let before = residentBytes()
var apps: [AppIndex] = (0..<appCount).map { AppIndex(app: "app\($0)") }
let emptyEstimate = apps.reduce(0) { $0 + $1.byteCount }
for index in 0..<count {
    let app = apps[index % appCount]
    let user = "u\(index / appCount)"
    let path: DataPath
    let token: String
    switch shape {
    case "long":
        // 2 KB of path keys and a 1 KB device id, both unique.
        path = DataPath(validatedSegments: [ExactString("k\(index)"), ExactString(String(long.dropLast(String(index).count + 2)))])
        token = "d" + String(index, radix: 16) + String(repeating: "x", count: 1023 - String(index, radix: 16).count)
    case "v2", "v2x3":
        let perUser = shape == "v2" ? 1 : 3
        let uid = "user-\(index / perUser)"
        let leaf: ExactString = ["inbox", "settings", "feed"][index % perUser]
        apps[(index / perUser) % appCount].subscribe(
            path: DataPath(validatedSegments: ["users", ExactString(uid), leaf]),
            subscriber: SubscriberKey(token: "fcm-" + String(index / perUser, radix: 16) + ":APA91b" + String(repeating: "x", count: 140), uid: uid),
            settings: SubscriptionSettings(mode: .value, format: .v2, expiresAt: 1_900_000_000, authUID: uid))
        continue
    case "2", "seeded2":
        path = DataPath(validatedSegments: ["users", ExactString(user), "inbox"])
        token = "fcm-" + String(index, radix: 16) + ":APA91b" + String(repeating: "x", count: 140)
    default:
        path = DataPath(validatedSegments: ["users", ExactString(user)])
        token = "fcm-" + String(index, radix: 16) + ":APA91b" + String(repeating: "x", count: 140)
    }
    app.subscribe(
        path: path, subscriber: SubscriberKey(token: token), settings: SubscriptionSettings(mode: .value, expiresAt: 1_900_000_000))
    switch shape {
    case "seeded1": app.restoreShadow(at: path, value: .number(String(index)))
    case "seeded2":
        app.restoreShadow(at: path, value: .object(["unread": .number("3"), "last": .string("message-\(index % 10_000_000)")]))
    default: break
    }
}
let after = residentBytes()
let total = apps.reduce(0) { $0 + $1.subscriptionCount }
let estimate = apps.reduce(0) { $0 + $1.byteCount } - emptyEstimate
let rss = after - before
print("subscriptions: \(total) in \(appCount) apps, shape \(shape)")
print("resident memory: \(rss / 1_048_576) MiB, \(rss / max(total, 1)) bytes per subscription")
print("estimate (AppIndex.byteCount): \(estimate / 1_048_576) MiB, \(estimate / max(total, 1)) bytes per subscription, "
    + "\(percent(estimate - rss, of: rss)) vs the resident growth")

func percent(_ part: Int, of whole: Int) -> String {
    let tenths = Int((Double(part) * 1000 / Double(max(whole, 1))).rounded())
    return (tenths < 0 ? "-" : "+") + "\(abs(tenths) / 10).\(abs(tenths) % 10)%"
}
withExtendedLifetime(apps) {}
