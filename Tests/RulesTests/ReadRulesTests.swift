import CompactJSON
import XCTest

@testable import Rules

final class ReadRulesTests: XCTestCase {
    static let example = """
        {"rules": {".read": false,
          "public": {".read": true},
          "users": {"$uid": {".read": "auth != null && auth.uid == $uid"}},
          "rooms": {"$room": {"members": {"$member": {".read": "auth.uid == $member || auth.admin == true"}}}}}}
        """

    static let alice = RuleAuth(uid: "alice")
    static let admin = RuleAuth(uid: "root", claims: ["admin": .bool(true)])

    static func rules(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws -> ReadRules {
        try ReadRules.parse(Array(text.utf8))
    }

    /// Rules with one `.read` expression at the root.
    static func root(_ expression: String) throws -> ReadRules {
        try ReadRules(document: .object([".read": .string(expression)]))
    }

    static func grants(_ expression: String, auth: RuleAuth? = alice, path: [String] = []) throws -> Bool {
        try root(expression).canRead(stringPath: path, auth: auth)
    }

    /// The error's description for a rules document that must not parse.
    static func error(_ text: String) -> String? {
        do {
            _ = try ReadRules.parse(Array(text.utf8))
            return nil
        } catch {
            return error.description
        }
    }

    static func expressionError(_ expression: String) -> String? {
        do {
            _ = try ReadRules(document: .object(["x": .object([".read": .string(expression)])]))
            return nil
        } catch {
            return error.description
        }
    }

    static func path(_ text: String) -> [ExactString] { text.split(separator: "/").map { ExactString(String($0)) } }

    // MARK: - The example document

    func testExampleDocument() throws {
        let rules = try Self.rules(Self.example)
        XCTAssertFalse(rules.isAllowAll)
        XCTAssertFalse(rules.canRead(path: [], auth: Self.admin))
        XCTAssertTrue(rules.canRead(path: Self.path("/public"), auth: nil))
        XCTAssertTrue(rules.canRead(path: Self.path("/public/news/1"), auth: nil))
        XCTAssertFalse(rules.canRead(path: Self.path("/other"), auth: Self.admin))

        XCTAssertTrue(rules.canRead(path: Self.path("/users/alice"), auth: Self.alice))
        XCTAssertTrue(rules.canRead(path: Self.path("/users/alice/inbox/7"), auth: Self.alice))
        XCTAssertFalse(rules.canRead(path: Self.path("/users/bob"), auth: Self.alice))
        XCTAssertFalse(rules.canRead(path: Self.path("/users/alice"), auth: nil))
        XCTAssertFalse(rules.canRead(path: Self.path("/users"), auth: Self.alice))

        XCTAssertTrue(rules.canRead(path: Self.path("/rooms/r1/members/alice"), auth: Self.alice))
        XCTAssertTrue(rules.canRead(path: Self.path("/rooms/r1/members/alice/typing"), auth: Self.alice))
        XCTAssertFalse(rules.canRead(path: Self.path("/rooms/r1/members/bob"), auth: Self.alice))
        XCTAssertTrue(rules.canRead(path: Self.path("/rooms/r1/members/bob"), auth: Self.admin))
        XCTAssertFalse(rules.canRead(path: Self.path("/rooms/r1/members"), auth: Self.admin))
        XCTAssertFalse(rules.canRead(path: Self.path("/rooms/r1"), auth: Self.admin))
        // auth.uid on a null auth is an evaluation error: denied, even though `auth.admin` is never reached.
        XCTAssertFalse(rules.canRead(path: Self.path("/rooms/r1/members/bob"), auth: nil))
    }

    func testBareTreeEqualsWrappedDocument() throws {
        let wrapped = try Self.rules(Self.example)
        guard case .object(let outer) = try JSONParser.parse(Self.example), let tree = outer["rules"] else {
            return XCTFail("example is not wrapped")
        }
        let bare = try ReadRules(document: tree)
        XCTAssertEqual(bare, wrapped)
        XCTAssertTrue(bare.canRead(path: Self.path("/users/alice"), auth: Self.alice))
    }

    // MARK: - Cascade and the walk

    func testGrantAtParentCoversChildren() throws {
        let rules = try Self.rules(#"{"a": {".read": true, "b": {".read": false, "c": {".read": "false"}}}}"#)
        XCTAssertTrue(rules.canRead(path: ["a"], auth: nil))
        XCTAssertTrue(rules.canRead(path: ["a", "b"], auth: nil))
        XCTAssertTrue(rules.canRead(path: ["a", "b", "c"], auth: nil))
        XCTAssertTrue(rules.canRead(path: ["a", "x"], auth: nil))
        XCTAssertFalse(rules.canRead(path: [], auth: nil))
        XCTAssertFalse(rules.canRead(path: ["b"], auth: nil))
    }

    func testRuleOnlyDeeperThanThePathDoesNotGrant() throws {
        let rules = try Self.rules(#"{"a": {"b": {"c": {".read": true}}}}"#)
        XCTAssertFalse(rules.canRead(path: [], auth: Self.alice))
        XCTAssertFalse(rules.canRead(path: ["a"], auth: Self.alice))
        XCTAssertFalse(rules.canRead(path: ["a", "b"], auth: Self.alice))
        XCTAssertTrue(rules.canRead(path: ["a", "b", "c"], auth: Self.alice))
    }

    func testPathDeeperThanTheTreeInheritsTheDecision() throws {
        let rules = try Self.rules(#"{"open": {".read": true}, "shut": {".read": false}}"#)
        XCTAssertTrue(rules.canRead(path: ["open", "x", "y", "z", "w"], auth: nil))
        XCTAssertFalse(rules.canRead(path: ["shut", "x", "y"], auth: nil))
        XCTAssertFalse(rules.canRead(path: ["elsewhere", "x"], auth: nil))
    }

    func testRootPath() throws {
        XCTAssertTrue(try Self.rules(#"{".read": true}"#).canRead(path: [], auth: nil))
        XCTAssertFalse(try Self.rules(#"{".read": "auth != null"}"#).canRead(path: [], auth: nil))
        XCTAssertTrue(try Self.rules(#"{".read": "auth != null"}"#).canRead(path: [], auth: Self.alice))
        // A root grant covers everything.
        XCTAssertTrue(try Self.rules(#"{".read": "auth != null"}"#).canRead(path: ["a", "b"], auth: Self.alice))
    }

    func testNoGrantDefaultsToDenied() throws {
        for document in [#"{}"#, #"{"rules": {}}"#, #"{"a": {".write": true, ".validate": "newData.exists()"}}"#] {
            let rules = try Self.rules(document)
            XCTAssertFalse(rules.canRead(path: [], auth: Self.admin), document)
            XCTAssertFalse(rules.canRead(path: ["a"], auth: Self.admin), document)
            XCTAssertFalse(rules.canRead(path: ["a", "b"], auth: Self.admin), document)
        }
    }

    func testAllowAll() throws {
        XCTAssertTrue(ReadRules.allowAll.isAllowAll)
        XCTAssertTrue(ReadRules.allowAll.canRead(path: [], auth: nil))
        XCTAssertTrue(ReadRules.allowAll.canRead(path: ["a", "b", "c"], auth: nil))
        XCTAssertEqual(try Self.rules(#"{"rules": {".read": true}}"#), ReadRules.allowAll)
        XCTAssertTrue(try Self.rules(#"{".read": true, "x": {".read": false}}"#).isAllowAll)
        XCTAssertFalse(try Self.rules(#"{".read": "auth != null"}"#).isAllowAll)
        XCTAssertFalse(try Self.rules(#"{"x": {".read": true}}"#).isAllowAll)
    }

    func testOtherDotKeysAreIgnored() throws {
        let rules = try Self.rules(
            #"{"a": {".write": "this is not parsed ((", ".indexOn": ["x"], ".validate": 3, ".read": true}}"#)
        XCTAssertTrue(rules.canRead(path: ["a"], auth: nil))
    }

    // MARK: - Wildcards

    func testWildcardsBindTheirKey() throws {
        let rules = try Self.rules(
            #"{"a": {"$x": {"$y": {".read": "$x == auth.uid && $y == 'inbox'"}}}}"#)
        XCTAssertTrue(rules.canRead(path: ["a", "alice", "inbox"], auth: Self.alice))
        XCTAssertTrue(rules.canRead(path: ["a", "alice", "inbox", "m1"], auth: Self.alice))
        XCTAssertFalse(rules.canRead(path: ["a", "alice", "outbox"], auth: Self.alice))
        XCTAssertFalse(rules.canRead(path: ["a", "bob", "inbox"], auth: Self.alice))
        XCTAssertFalse(rules.canRead(path: ["a", "alice"], auth: Self.alice))
    }

    func testLiteralChildTakesPriorityOverWildcard() throws {
        let rules = try Self.rules(
            #"{"users": {"$uid": {".read": true}, "admin": {".read": "auth.admin == true"}}}"#)
        XCTAssertTrue(rules.canRead(path: ["users", "alice"], auth: nil))
        // "admin" matches the literal child, so the wildcard's grant does not apply.
        XCTAssertFalse(rules.canRead(path: ["users", "admin"], auth: Self.alice))
        XCTAssertTrue(rules.canRead(path: ["users", "admin"], auth: Self.admin))
        // Below the literal the wildcard is not used either.
        XCTAssertFalse(rules.canRead(path: ["users", "admin", "x"], auth: nil))
    }

    // MARK: - Expressions

    func testAuthNullVersusPresent() throws {
        XCTAssertTrue(try Self.grants("auth == null", auth: nil))
        XCTAssertFalse(try Self.grants("auth == null", auth: Self.alice))
        XCTAssertTrue(try Self.grants("auth != null", auth: Self.alice))
        XCTAssertFalse(try Self.grants("auth != null", auth: nil))
        XCTAssertTrue(try Self.grants("auth.uid == 'alice'", auth: Self.alice))
        // Members of a null auth are an error, which denies even under `!` or `!=`.
        XCTAssertFalse(try Self.grants("auth.uid != 'bob'", auth: nil))
        XCTAssertFalse(try Self.grants("!(auth.uid == 'bob')", auth: nil))
        // Short-circuit keeps the error from happening.
        XCTAssertTrue(try Self.grants("auth == null || auth.uid == 'alice'", auth: nil))
        XCTAssertFalse(try Self.grants("auth != null && auth.uid == 'alice'", auth: nil))
    }

    func testClaims() throws {
        let auth = RuleAuth(
            uid: "u1",
            claims: [
                "admin": .bool(true), "role": .string("editor"), "level": .number("3"),
                "org": .object(["id": .string("acme"), "team": .object(["name": .string("core")])]),
                "uid": .string("spoofed"),
            ])
        XCTAssertTrue(try Self.grants("auth.admin == true", auth: auth))
        XCTAssertTrue(try Self.grants("auth.role == 'editor'", auth: auth))
        XCTAssertTrue(try Self.grants("auth.level == 3", auth: auth))
        XCTAssertTrue(try Self.grants("auth.level == 3.0", auth: auth))
        XCTAssertTrue(try Self.grants("auth.level == 3e0", auth: auth))
        XCTAssertTrue(try Self.grants("auth.org.id == 'acme'", auth: auth))
        XCTAssertTrue(try Self.grants("auth.org.team.name == \"core\"", auth: auth))
        XCTAssertTrue(try Self.grants("auth.org.missing == null", auth: auth))
        // auth.uid is the token's uid, never a claim.
        XCTAssertTrue(try Self.grants("auth.uid == 'u1'", auth: auth))
        // A missing claim is null.
        XCTAssertTrue(try Self.grants("auth.missing == null", auth: auth))
        XCTAssertFalse(try Self.grants("auth.missing == false", auth: auth))
        // A member of a non-object claim is an error.
        XCTAssertFalse(try Self.grants("auth.role.x == null", auth: auth))
        XCTAssertFalse(try Self.grants("auth.missing.x == null", auth: auth))
        // A claim that is an object compares by content.
        XCTAssertTrue(try Self.grants("auth.org == auth.org", auth: auth))
        XCTAssertFalse(try Self.grants("auth.org == auth.org.team", auth: auth))
        XCTAssertTrue(try Self.grants("auth == auth", auth: auth))
        XCTAssertFalse(try Self.grants("auth == auth.org", auth: auth))
    }

    func testNotEqual() throws {
        XCTAssertTrue(try Self.grants("auth.uid != 'bob'"))
        XCTAssertFalse(try Self.grants("auth.uid != 'alice'"))
        XCTAssertTrue(try Self.grants("1 != '1'"))
        XCTAssertFalse(try Self.grants("null != null"))
    }

    func testAndBindsTighterThanOr() throws {
        XCTAssertTrue(try Self.grants("true || false && false"))
        XCTAssertTrue(try Self.grants("false && false || true"))
        XCTAssertFalse(try Self.grants("(true || false) && false"))
        XCTAssertTrue(try Self.grants("!false && true"))
        XCTAssertFalse(try Self.grants("!true || false"))
        XCTAssertFalse(try Self.grants("!(true || false)"))
        XCTAssertTrue(try Self.grants("!!true"))
        // `==` binds tighter than `&&`, `!` tighter than `==`.
        XCTAssertTrue(try Self.grants("1 == 1 && 2 == 2"))
        XCTAssertTrue(try Self.grants("!false == true"))
        XCTAssertTrue(try Self.grants("true == false == false"))
        XCTAssertTrue(try Self.grants("true && true && true && true || false"))
    }

    func testShortCircuit() throws {
        // The right side would be an error (member of a null auth) or a non-boolean.
        XCTAssertTrue(try Self.grants("true || auth.uid == 'x'", auth: nil))
        XCTAssertFalse(try Self.grants("false && auth.uid", auth: nil))
        XCTAssertTrue(try Self.grants("true || 'text'"))
    }

    func testParentheses() throws {
        XCTAssertTrue(try Self.grants("((true))"))
        XCTAssertTrue(try Self.grants("(auth.uid == 'alice') && (false || (1 == 1))"))
        XCTAssertFalse(try Self.grants("false && (true || true)"))
        XCTAssertTrue(try Self.grants("(false && true) || true"))
        XCTAssertTrue(try Self.grants(String(repeating: "(", count: 64) + "true" + String(repeating: ")", count: 64)))
    }

    func testStringsWithBothQuoteKinds() throws {
        XCTAssertTrue(try Self.grants(#"'abc' == "abc""#))
        XCTAssertTrue(try Self.grants(#"'it\'s' == "it's""#))
        XCTAssertTrue(try Self.grants(#""say \"hi\"" == 'say "hi"'"#))
        XCTAssertTrue(try Self.grants(#"'a\\b' == "a\\b""#))
        XCTAssertTrue(try Self.grants(#"'\u00e9\n' == "é\n""#))
        XCTAssertTrue(try Self.grants(#"'\ud83d\ude00' == "😀""#))
        XCTAssertTrue(try Self.grants(#"'' == """#))
        XCTAssertFalse(try Self.grants(#"'abc' == 'abd'"#))
        // Strings compare by code points, not canonical equivalence.
        XCTAssertFalse(try Self.grants("'\u{E9}' == 'e\u{301}'"))
        let rules = try Self.rules(#"{"$k": {".read": "$k == 'a b' || $k == \"x'y\""}}"#)
        XCTAssertTrue(rules.canRead(path: ["a b"], auth: nil))
        XCTAssertTrue(rules.canRead(path: ["x'y"], auth: nil))
        XCTAssertFalse(rules.canRead(path: ["xy"], auth: nil))
    }

    func testEqualityIsTypeStrict() throws {
        XCTAssertFalse(try Self.grants("1 == '1'"))
        XCTAssertFalse(try Self.grants("true == 'true'"))
        XCTAssertFalse(try Self.grants("true == 1"))
        XCTAssertFalse(try Self.grants("null == false"))
        XCTAssertFalse(try Self.grants("null == ''"))
        XCTAssertFalse(try Self.grants("null == 0"))
        XCTAssertTrue(try Self.grants("null == null"))
        XCTAssertTrue(try Self.grants("1 == 1.0"))
        XCTAssertTrue(try Self.grants("-0 == 0"))
        XCTAssertTrue(try Self.grants("-2.5e1 == -25"))
        XCTAssertFalse(try Self.grants("auth == true"))
        // A path key is a string, even when it looks like a number.
        let rules = try Self.rules(#"{"$n": {".read": "$n == 1 || $n == '2'"}}"#)
        XCTAssertFalse(rules.canRead(path: ["1"], auth: nil))
        XCTAssertTrue(rules.canRead(path: ["2"], auth: nil))
        let numeric = RuleAuth(uid: "1", claims: ["n": .string("1")])
        XCTAssertFalse(try Self.grants("auth.n == 1", auth: numeric))
    }

    func testOnlyBooleanTrueGrants() throws {
        for expression in [
            "'true'", "1", "null", "auth", "auth.uid", "auth.uid || true", "!auth", "!'x'", "'x' && true",
        ] {
            XCTAssertFalse(try Self.grants(expression), expression)
        }
    }

    // MARK: - Parse errors

    func testBadTokenError() {
        XCTAssertEqual(
            Self.error(#"{"rules": {"users": {"$uid": {".read": "auth.uid === $uid"}}}}"#),
            "rules /users/$uid/.read: unexpected token '=' at 12")
        XCTAssertEqual(Self.expressionError("auth.uid = 'x'"), "rules /x/.read: unexpected token '=' at 10")
        XCTAssertEqual(Self.expressionError("true & false"), "rules /x/.read: unexpected token '&' at 6")
        XCTAssertEqual(Self.expressionError("true false"), "rules /x/.read: unexpected token 'false' at 6")
        XCTAssertEqual(Self.expressionError("auth.uid == #"), "rules /x/.read: unexpected character '#' at 13")
        XCTAssertEqual(Self.expressionError("auth.uid == é"), "rules /x/.read: unexpected character 'é' at 13")
        XCTAssertEqual(Self.expressionError("auth.uid =="), "rules /x/.read: unexpected end of expression at 12")
        XCTAssertEqual(Self.expressionError(""), "rules /x/.read: unexpected end of expression at 1")
        XCTAssertEqual(Self.expressionError("root.child('x')"), "rules /x/.read: unknown identifier 'root' at 1")
        XCTAssertEqual(Self.expressionError("auth. == null"), "rules /x/.read: expected a name after '.' at 5")
        XCTAssertEqual(
            Self.expressionError("auth.uid.length == 3"),
            "rules /x/.read: 'auth.uid' is a string and has no member 'length' at 6")
        XCTAssertEqual(Self.expressionError("'abc"), "rules /x/.read: unterminated string at 1")
        XCTAssertEqual(Self.expressionError(#"'a\qb'"#), #"rules /x/.read: invalid escape '\q' at 3"#)
        XCTAssertEqual(Self.expressionError(#"'\ud800'"#), #"rules /x/.read: invalid \u escape at 2"#)
        XCTAssertEqual(Self.expressionError("1.x"), "rules /x/.read: invalid number at 1")
        XCTAssertEqual(Self.expressionError("$ == 'a'"), "rules /x/.read: expected a variable name after '$' at 1")
        XCTAssertEqual(Self.expressionError("auth.uid == 'a' - 1"), "rules /x/.read: unexpected character '-' at 17")
    }

    func testUnbalancedParenthesesErrors() {
        XCTAssertEqual(Self.expressionError("(auth != null"), "rules /x/.read: unclosed '(' at 1")
        XCTAssertEqual(Self.expressionError("true && ((true)"), "rules /x/.read: unclosed '(' at 9")
        XCTAssertEqual(Self.expressionError("auth != null)"), "rules /x/.read: unmatched ')' at 13")
        XCTAssertEqual(Self.expressionError("()"), "rules /x/.read: unexpected token ')' at 2")
        XCTAssertEqual(Self.expressionError("(true true)"), "rules /x/.read: unexpected token 'true' at 7")
    }

    func testUnknownVariableError() {
        XCTAssertEqual(
            Self.error(#"{"public": {".read": "$uid == auth.uid"}}"#),
            "rules /public/.read: unknown variable '$uid' at 1")
        // A wildcard binds only below itself, not in siblings.
        XCTAssertEqual(
            Self.error(#"{"users": {"$uid": {".read": true}, "x": {".read": "auth.uid == $uid"}}}"#),
            "rules /users/x/.read: unknown variable '$uid' at 13")
        // Nor at its own parent.
        XCTAssertEqual(
            Self.error(#"{"users": {".read": "$uid == 'a'", "$uid": {}}}"#),
            "rules /users/.read: unknown variable '$uid' at 1")
    }

    func testTwoWildcardsOnOneLevelError() {
        XCTAssertEqual(
            Self.error(#"{"rules": {"users": {"$a": {".read": true}, "$b": {}}}}"#),
            "rules /users: more than one wildcard on one level ('$a', '$b')")
        XCTAssertEqual(
            Self.error(#"{"$a": {}, "$b": {}}"#), "rules /: more than one wildcard on one level ('$a', '$b')")
    }

    func testReadMustBeBooleanOrStringError() {
        XCTAssertEqual(
            Self.error(#"{"a": {"b": {".read": 1}}}"#),
            "rules /a/b/.read: expected a boolean or an expression string, got a number")
        XCTAssertEqual(
            Self.error(#"{".read": null}"#), "rules /.read: expected a boolean or an expression string, got null")
        XCTAssertEqual(
            Self.error(#"{".read": ["true"]}"#),
            "rules /.read: expected a boolean or an expression string, got an array")
        XCTAssertEqual(
            Self.error(#"{".read": {"x": true}}"#),
            "rules /.read: expected a boolean or an expression string, got an object")
    }

    func testExpressionTooLongError() throws {
        let longest = "'" + String(repeating: "a", count: 4094) + "'"
        XCTAssertNoThrow(try Self.root(longest))
        XCTAssertEqual(
            Self.expressionError(longest + " "), "rules /x/.read: expression longer than 4096 bytes (4097) at 4097")
        // Bytes, not characters.
        XCTAssertNotNil(Self.expressionError("'" + String(repeating: "é", count: 2048) + "'"))
    }

    func testNestingTooDeepError() throws {
        XCTAssertEqual(
            Self.expressionError(String(repeating: "(", count: 65) + "true" + String(repeating: ")", count: 65)),
            "rules /x/.read: expression nested deeper than 64 at 65")
        XCTAssertEqual(
            Self.expressionError(String(repeating: "!", count: 65) + "true"),
            "rules /x/.read: expression nested deeper than 64 at 65")
        XCTAssertTrue(try Self.grants(String(repeating: "!", count: 64) + "true"))
        XCTAssertEqual(
            Self.expressionError("true" + String(repeating: " == true", count: 65)),
            "rules /x/.read: expression nested deeper than 64 at \(4 + 64 * 8 + 2)")
        XCTAssertTrue(try Self.grants("true" + String(repeating: " == true", count: 64)))
        XCTAssertFalse(try Self.grants("!(" + String(repeating: "!", count: 62) + "true)"))  // 63 negations
        XCTAssertNotNil(Self.expressionError("!(" + String(repeating: "!", count: 63) + "true)"))
        // Long flat chains of && and || are fine.
        XCTAssertTrue(try Self.grants(Array(repeating: "true", count: 500).joined(separator: " && ")))
    }

    func testStructureErrors() {
        XCTAssertEqual(Self.error("[1]"), "rules: the document must be a JSON object, got an array")
        XCTAssertEqual(Self.error(#"{"rules": true}"#), "rules: 'rules' must be a JSON object, got a boolean")
        XCTAssertEqual(Self.error(#"{"a": true}"#), "rules /a: expected an object, got a boolean")
        XCTAssertEqual(Self.error(#"{"a": {"b": "x"}}"#), "rules /a/b: expected an object, got a string")
        XCTAssertEqual(Self.error(#"{"$": {}}"#), "rules /$: a wildcard needs a name after '$'")
        XCTAssertEqual(Self.error(#"{"a/b": {}}"#), "rules /a/b: a key cannot contain '/'")
        XCTAssertEqual(Self.error(#"{"": {}}"#), "rules /: a key cannot be empty")
        XCTAssertEqual(
            Self.error(#"{"$x": {"a": {"$x": {}}}}"#), "rules /$x/a/$x: wildcard '$x' is already bound above")
        XCTAssertEqual(
            Self.error(#"{"a": {".read": true, ".read": false}}"#)?.hasPrefix("rules: invalid JSON at byte"), true)
        XCTAssertEqual(Self.error("{"), "rules: invalid JSON at byte 1: expected a key")

        var deep: JSONValue = .object([".read": .bool(true)])
        for _ in 0..<300 { deep = .object(["a": deep]) }
        XCTAssertThrowsError(try ReadRules(document: deep)) { error in
            XCTAssertTrue(String(describing: error).hasSuffix("rules nested deeper than 256 levels"))
        }
    }

    func testErrorValueParts() {
        do {
            _ = try ReadRules.parse(Array(#"{"a": {".read": "true &&"}}"#.utf8))
            XCTFail("parsed")
        } catch {
            XCTAssertEqual(error, RulesError(path: "/a/.read", reason: "unexpected end of expression at 8"))
        }
    }

    // MARK: - Scale

    /// Re-checking many subscriptions: the walk and the evaluation allocate nothing, so this stays fast.
    func testManyChecksOnFiveLevelPaths() throws {
        let rules = try Self.rules(
            #"{"apps": {"$app": {"rooms": {"$room": {"members": {"$member": {".read": "auth.uid == $member || auth.admin == true"}}}}}}}"#
        )
        let paths = (0..<1000).map { ["apps", "a", "rooms", "r\($0 % 10)", "members", $0 % 2 == 0 ? "alice" : "bob"] }
        var granted = 0
        for _ in 0..<100 {
            for path in paths where rules.canRead(stringPath: path, auth: Self.alice) { granted += 1 }
        }
        XCTAssertEqual(granted, 50_000)
    }
}

extension ReadRules {
    /// Tests write paths as plain strings.
    func canRead(stringPath path: [String], auth: RuleAuth?) -> Bool { canRead(path: path.map { ExactString($0) }, auth: auth) }
}
