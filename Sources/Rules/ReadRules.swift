import CompactJSON

/// The verified token of a request: `auth.uid` is `uid`, `auth.<name>` is the claim `name` (null when missing).
public struct RuleAuth: Sendable, Equatable {
    public var uid: String
    public var claims: [ExactString: JSONValue]

    public init(uid: String, claims: [ExactString: JSONValue] = [:]) {
        self.uid = uid
        self.claims = claims
    }
}

/// A rules document that cannot be used. `path` names the rule (`/users/$uid/.read`), empty for the
/// document as a whole; `reason` ends with the 1-based column (UTF-8 bytes) for expression errors.
public struct RulesError: Error, Equatable, CustomStringConvertible {
    public let path: String
    public let reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { path.isEmpty ? "rules: \(reason)" : "rules \(path): \(reason)" }
}

/// Per-app read rules: a Firebase-style tree of `.read` rules per path pattern, compiled once.
///
/// ```json
/// {"rules": {".read": false,
///   "public": {".read": true},
///   "users": {"$uid": {".read": "auth != null && auth.uid == $uid"}}}}
/// ```
///
/// `.read` is a JSON boolean or an expression: literals `true` `false` `null`, numbers, quoted strings;
/// `auth`, `auth.uid`, `auth.<claim>(.<member>)*`; `$name` bound by a wildcard on the rule's path;
/// `!`, `==`, `!=`, `&&`, `||` (that precedence, short-circuit) and parentheses. `==` is JS `===`.
/// Errors while evaluating (a member of a null `auth`, `!`/`&&`/`||` on a non-boolean) deny, like a
/// Firebase rule error; a result other than boolean `true` denies too.
public struct ReadRules: Sendable, Equatable {
    struct Node: Sendable, Equatable {
        /// Literal children by key bytes (never Unicode canonical equivalence: see ``ExactString``).
        var children: [ExactString: Int] = [:]
        /// The `$wildcard` child, or -1.
        var wildcard = -1
        /// The `.read` expression in `program`, or -1 (no rule, or `false`).
        var read = -1
    }

    public static let maximumExpressionLength = ExpressionCompiler.maximumLength
    public static let maximumExpressionDepth = ExpressionCompiler.maximumDepth
    /// Levels of the rules tree below the root.
    public static let maximumTreeDepth = 256

    /// nodes[0] is the root.
    var nodes: [Node]
    var program: RuleProgram

    /// Grants every read: what an app without a rules document gets.
    public static let allowAll = ReadRules(
        nodes: [Node(read: 0)], program: RuleProgram(ops: [.literal(.bool(true))], operands: []))

    init(nodes: [Node], program: RuleProgram) {
        self.nodes = nodes
        self.program = program
    }

    /// True when the root's `.read` is literally `true`, so every read is granted.
    public var isAllowAll: Bool {
        let read = nodes[0].read
        return read >= 0 && program.ops[read] == .literal(.bool(true))
    }

    /// Parses a rules document: `{"rules": {...}}` or the bare tree. (A bare tree whose only key is
    /// `rules` is read as the wrapper.)
    public static func parse(_ bytes: [UInt8]) throws(RulesError) -> ReadRules {
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes, rejectDuplicateKeys: true)
        } catch {
            throw RulesError(path: "", reason: error.description)
        }
        return try ReadRules(document: document)
    }

    public init(document: JSONValue) throws(RulesError) {
        guard case .object(var tree) = document else {
            throw RulesError(path: "", reason: "the document must be a JSON object, got \(Self.typeName(document))")
        }
        if tree.count == 1, let wrapped = tree["rules"] {
            guard case .object(let inner) = wrapped else {
                throw RulesError(path: "", reason: "'rules' must be a JSON object, got \(Self.typeName(wrapped))")
            }
            tree = inner
        }
        var builder = Builder()
        var segments: [ExactString] = []
        var scope: [String: Int] = [:]
        _ = try builder.build(tree, segments: &segments, scope: &scope)
        self.init(nodes: builder.nodes, program: builder.program)
    }

    /// Firebase semantics: walk from the root along `path` (a literal child first, else the level's
    /// wildcard, which binds its variable to the key); granted as soon as the `.read` of a node on the
    /// walk, root and the node for `path` included, is true. A path deeper than the tree keeps the
    /// decision of the walk; no granting `.read` on the walk denies. `auth` nil is `auth == null`.
    public func canRead(path: [ExactString], auth: RuleAuth?) -> Bool {
        nodes.withUnsafeBufferPointer { nodes in
            var node = 0
            var depth = 0
            while true {
                let read = nodes[node].read
                if read >= 0, program.grants(read, path: path, auth: auth) { return true }
                guard depth < path.count else { return false }
                if !nodes[node].children.isEmpty, let child = nodes[node].children[path[depth]] {
                    node = child
                } else if nodes[node].wildcard >= 0 {
                    node = nodes[node].wildcard
                } else {
                    return false
                }
                depth += 1
            }
        }
    }

    static func typeName(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    static func display(_ segments: [String]) -> String { "/" + segments.joined(separator: "/") }
    static func display(_ segments: [ExactString]) -> String { display(segments.map(\.string)) }

    struct Builder {
        var nodes: [Node] = []
        var program = RuleProgram()

        /// Builds the node for `members` at `segments`; `scope` holds the wildcards on the way (name → path index).
        mutating func build(
            _ members: [ExactString: JSONValue], segments: inout [ExactString], scope: inout [String: Int]
        ) throws(RulesError) -> Int {
            guard segments.count <= ReadRules.maximumTreeDepth else {
                throw RulesError(
                    path: ReadRules.display(segments),
                    reason: "rules nested deeper than \(ReadRules.maximumTreeDepth) levels")
            }
            let index = nodes.count
            nodes.append(Node())
            // Sorted, so that equal documents compile to equal values and report the same first error.
            let keys = JSONWriter.sortedKeys(members)
            let wildcards = keys.filter { $0.string.hasPrefix("$") }
            if wildcards.count > 1 {
                throw RulesError(
                    path: ReadRules.display(segments),
                    reason: "more than one wildcard on one level ("
                        + wildcards.map { "'\($0)'" }.joined(separator: ", ") + ")")
            }
            if let read = members[".read"] {
                let rulePath = ReadRules.display(segments + [".read"])
                switch read {
                case .bool(true):
                    nodes[index].read = program.append(.literal(.bool(true)))
                case .bool(false):
                    break
                case .string(let text):
                    do {
                        nodes[index].read = try ExpressionCompiler.compile(text, scope: scope, into: &program)
                    } catch {
                        throw RulesError(path: rulePath, reason: error.message)
                    }
                default:
                    throw RulesError(
                        path: rulePath,
                        reason: "expected a boolean or an expression string, got \(ReadRules.typeName(read))")
                }
            }
            for exactKey in keys where !exactKey.string.hasPrefix(".") {
                let key = exactKey.string
                guard let value = members[exactKey] else { continue }
                segments.append(exactKey)
                defer { segments.removeLast() }
                guard case .object(let childMembers) = value else {
                    throw RulesError(
                        path: ReadRules.display(segments),
                        reason: "expected an object, got \(ReadRules.typeName(value))")
                }
                if key.utf8.contains(UInt8(ascii: "/")) {
                    throw RulesError(path: ReadRules.display(segments), reason: "a key cannot contain '/'")
                }
                if key.hasPrefix("$") {
                    let name = String(key.dropFirst())
                    if name.isEmpty {
                        throw RulesError(path: ReadRules.display(segments), reason: "a wildcard needs a name after '$'")
                    }
                    if scope[name] != nil {
                        throw RulesError(
                            path: ReadRules.display(segments), reason: "wildcard '\(key)' is already bound above")
                    }
                    scope[name] = segments.count - 1
                    let child = try build(childMembers, segments: &segments, scope: &scope)
                    scope[name] = nil
                    nodes[index].wildcard = child
                } else {
                    if key.isEmpty {
                        throw RulesError(path: ReadRules.display(segments), reason: "a key cannot be empty")
                    }
                    nodes[index].children[exactKey] = try build(childMembers, segments: &segments, scope: &scope)
                }
            }
            return index
        }
    }
}
