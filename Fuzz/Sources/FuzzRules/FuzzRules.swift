import CFuzzDriver
import CompactJSON
import Rules

/// libFuzzer entry for the read rules. The first byte chooses the input's meaning:
///   even: the rest is a rules document (JSON);
///   odd: the rest is one `.read` expression, put at `/users/$uid/$room` of a fixed document.
/// A document that compiles is evaluated on a few paths with a few tokens (anonymous, a user, claims).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRules(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let rest = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let rules: ReadRules
    if data[0] & 1 == 0 {
        guard let parsed = try? ReadRules.parse(rest) else { return 0 }
        rules = parsed
    } else {
        let expression = JSONValue.string(String(decoding: rest, as: UTF8.self))
        let document = JSONValue.object([
            "rules": .object([
                "public": .object([".read": .bool(true)]),
                "users": .object(["$uid": .object(["$room": .object([".read": expression])])]),
            ])
        ])
        guard let parsed = try? ReadRules(document: document) else { return 0 }
        rules = parsed
    }
    for path in Inputs.paths {
        for auth in Inputs.auths {
            _ = rules.canRead(path: path, auth: auth)
        }
    }
    return 0
}

enum Inputs {
    static let paths: [[ExactString]] = [
        [], ["public"], ["users"], ["users", "alice"], ["users", "alice", "inbox"], ["users", "bob", "inbox", "m1"],
        ["users", "", "x"], ["a", "b", "c", "d", "e", "f", "g", "h"],
    ]
    static let auths: [RuleAuth?] = [
        nil,
        RuleAuth(uid: "alice"),
        RuleAuth(
            uid: "bob",
            claims: [
                "uid": .string("bob"), "admin": .bool(true), "level": .number("3"), "groups": .array([.string("a")]),
                "org": .object(["id": .string("o1"), "role": .object(["name": .string("owner")])]), "none": .null,
            ]),
    ]
}

/// The entry point (SwiftPM renames an executable's `main` to `<Module>_main`): libFuzzer's driver.
@_cdecl("FuzzRules_main")
public func fuzzRulesMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    CFuzzDriver_run(argc, argv) { data, size in data.map { fuzzRules($0, size) } ?? 0 }
}
