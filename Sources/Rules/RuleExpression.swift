import CompactJSON

/// A value met while evaluating a `.read` expression. Numbers compare by numeric value (JS numbers),
/// strings by their UTF-8 bytes (JS compares code units, not canonical equivalents).
enum RuleValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    /// The `auth` object itself (non-null auth).
    case auth
    /// A claim that is an array or an object.
    case json(JSONValue)

    /// `nil` when a claim's number lexeme does not convert (cannot happen with parsed JSON).
    init?(claim: JSONValue) {
        switch claim {
        case .null: self = .null
        case .bool(let flag): self = .bool(flag)
        case .number(let lexeme):
            guard let number = Double(lexeme) else { return nil }
            self = .number(number)
        case .string(let text): self = .string(text)
        case .array, .object: self = .json(claim)
        }
    }

    /// JS strict equality (`===`): values of different types are unequal, `null === null`.
    /// Objects have no identity here: two claims compare by content, `auth` equals only `auth`.
    func strictlyEquals(_ other: RuleValue) -> Bool {
        switch (self, other) {
        case (.null, .null): return true
        case (.bool(let left), .bool(let right)): return left == right
        case (.number(let left), .number(let right)): return left == right
        case (.string(let left), .string(let right)):
            return left.utf8.count == right.utf8.count && left.utf8.elementsEqual(right.utf8)
        case (.auth, .auth): return true
        case (.json(let left), .json(let right)): return left == right
        default: return false
        }
    }
}

/// Compiled `.read` expressions of one rules document, stored flat: an expression is an index into `ops`;
/// `&&` / `||` list their operands in `operands`. Evaluation recurses at most as deep as the expression
/// nests (bounded at compile time) and allocates nothing.
struct RuleProgram: Sendable, Equatable {
    enum Op: Sendable, Equatable {
        case literal(RuleValue)
        /// `$name`: the path key at this index (bound by a wildcard on the walk).
        case variable(pathIndex: Int)
        case auth
        case authUID
        /// `auth.a.b…` where `a` is a claim name (never `uid`).
        case authClaim([String])
        case not(Int)
        case equal(Int, Int)
        case notEqual(Int, Int)
        case and(start: Int, count: Int)
        case or(start: Int, count: Int)
    }

    var ops: [Op] = []
    var operands: [Int] = []

    mutating func append(_ op: Op) -> Int {
        ops.append(op)
        return ops.count - 1
    }

    /// True only when the expression evaluates, without error, to exactly boolean `true`.
    func grants(_ expression: Int, path: [ExactString], auth: RuleAuth?) -> Bool {
        if case .bool(true)? = evaluate(expression, path: path, auth: auth) { return true }
        return false
    }

    /// `nil` is an evaluation error (member of a null `auth`, `!`/`&&`/`||` on a non-boolean); like a
    /// Firebase rule error, it makes the whole expression deny.
    func evaluate(_ index: Int, path: [ExactString], auth: RuleAuth?) -> RuleValue? {
        switch ops[index] {
        case .literal(let value):
            return value
        case .variable(let pathIndex):
            guard pathIndex < path.count else { return nil }
            return .string(path[pathIndex].string)
        case .auth:
            return auth == nil ? .null : .auth
        case .authUID:
            guard let auth else { return nil }
            return .string(auth.uid)
        case .authClaim(let names):
            guard let auth, let first = names.first else { return nil }
            var current = auth.claims[ExactString(first)] ?? .null
            for name in names.dropFirst() {
                guard case .object(let members) = current else { return nil }
                current = members[ExactString(name)] ?? .null
            }
            return RuleValue(claim: current)
        case .not(let operand):
            guard case .bool(let flag)? = evaluate(operand, path: path, auth: auth) else { return nil }
            return .bool(!flag)
        case .equal(let left, let right):
            guard let lhs = evaluate(left, path: path, auth: auth), let rhs = evaluate(right, path: path, auth: auth)
            else { return nil }
            return .bool(lhs.strictlyEquals(rhs))
        case .notEqual(let left, let right):
            guard let lhs = evaluate(left, path: path, auth: auth), let rhs = evaluate(right, path: path, auth: auth)
            else { return nil }
            return .bool(!lhs.strictlyEquals(rhs))
        case .and(let start, let count):
            for position in start..<(start + count) {
                guard case .bool(let flag)? = evaluate(operands[position], path: path, auth: auth) else { return nil }
                if !flag { return .bool(false) }
            }
            return .bool(true)
        case .or(let start, let count):
            for position in start..<(start + count) {
                guard case .bool(let flag)? = evaluate(operands[position], path: path, auth: auth) else { return nil }
                if flag { return .bool(true) }
            }
            return .bool(false)
        }
    }
}

/// Compiles one expression string into a ``RuleProgram``.
struct ExpressionCompiler {
    struct Failure: Error {
        let reason: String
        /// 1-based, in UTF-8 bytes of the expression.
        let column: Int
        var message: String { "\(reason) at \(column)" }
    }

    static let maximumLength = 4096
    static let maximumDepth = 64

    /// Compiles `text`; `scope` maps each wildcard name on the rule's path to its index in the path.
    /// Returns the expression's index in `program`.
    static func compile(_ text: String, scope: [String: Int], into program: inout RuleProgram) throws(Failure) -> Int {
        let source = Array(text.utf8)
        guard source.count <= maximumLength else {
            throw Failure(
                reason: "expression longer than \(maximumLength) bytes (\(source.count))", column: maximumLength + 1)
        }
        var lexer = Lexer(source: source)
        var tokens: [Token] = []
        while true {
            let token = try lexer.next()
            tokens.append(token)
            if token.kind == .end { break }
        }
        // The program moves into the compiler and back (no copy of its arrays per expression).
        var compiler = ExpressionCompiler(source: source, tokens: tokens, scope: scope, program: RuleProgram())
        swap(&compiler.program, &program)
        defer { swap(&compiler.program, &program) }
        let root = try compiler.parseOr()
        let trailing = compiler.tokens[compiler.position]
        switch trailing.kind {
        case .end: break
        case .close: throw Failure(reason: "unmatched ')'", column: trailing.start + 1)
        default: throw compiler.unexpected(trailing)
        }
        return root.index
    }

    // MARK: Parser

    let source: [UInt8]
    let tokens: [Token]
    let scope: [String: Int]
    var program: RuleProgram
    var position = 0
    /// Parentheses and `!` currently open.
    var depth = 0

    init(source: [UInt8], tokens: [Token], scope: [String: Int], program: RuleProgram) {
        self.source = source
        self.tokens = tokens
        self.scope = scope
        self.program = program
    }

    /// `height`: operators nested above the deepest leaf (a leaf is 0), at most `maximumDepth`.
    typealias Parsed = (index: Int, height: Int)

    var current: Token { tokens[position] }

    func tooDeep(_ token: Token) -> Failure {
        Failure(reason: "expression nested deeper than \(Self.maximumDepth)", column: token.start + 1)
    }

    func unexpected(_ token: Token) -> Failure {
        if token.kind == .end { return Failure(reason: "unexpected end of expression", column: token.start + 1) }
        var text = String(decoding: source[token.start..<token.end], as: UTF8.self)
        if text.count > 24 { text = String(text.prefix(24)) + "…" }
        return Failure(reason: "unexpected token '\(text)'", column: token.start + 1)
    }

    mutating func parseOr() throws(Failure) -> Parsed {
        try parseList(
            operator: .or, operand: { (compiler: inout ExpressionCompiler) throws(Failure) in try compiler.parseAnd() })
    }

    mutating func parseAnd() throws(Failure) -> Parsed {
        try parseList(
            operator: .and,
            operand: { (compiler: inout ExpressionCompiler) throws(Failure) in try compiler.parseEquality() })
    }

    /// `a op b op c …` as one n-ary node (keeps long `&&` / `||` chains flat).
    mutating func parseList(
        operator kind: Token.Kind, operand: (inout ExpressionCompiler) throws(Failure) -> Parsed
    ) throws(Failure) -> Parsed {
        let first = try operand(&self)
        guard current.kind == kind else { return first }
        let operatorToken = current
        var items = [first.index]
        var height = first.height
        while current.kind == kind {
            position += 1
            let next = try operand(&self)
            items.append(next.index)
            height = max(height, next.height)
        }
        guard height < Self.maximumDepth else { throw tooDeep(operatorToken) }
        let start = program.operands.count
        program.operands.append(contentsOf: items)
        let op: RuleProgram.Op =
            kind == .and ? .and(start: start, count: items.count) : .or(start: start, count: items.count)
        return (program.append(op), height + 1)
    }

    mutating func parseEquality() throws(Failure) -> Parsed {
        var left = try parseUnary()
        while current.kind == .equal || current.kind == .notEqual {
            let operatorToken = current
            position += 1
            let right = try parseUnary()
            let height = max(left.height, right.height) + 1
            guard height <= Self.maximumDepth else { throw tooDeep(operatorToken) }
            let op: RuleProgram.Op =
                operatorToken.kind == .equal ? .equal(left.index, right.index) : .notEqual(left.index, right.index)
            left = (program.append(op), height)
        }
        return left
    }

    mutating func parseUnary() throws(Failure) -> Parsed {
        guard current.kind == .not else { return try parsePrimary() }
        let token = current
        position += 1
        depth += 1
        guard depth <= Self.maximumDepth else { throw tooDeep(token) }
        let operand = try parseUnary()
        depth -= 1
        guard operand.height < Self.maximumDepth else { throw tooDeep(token) }
        return (program.append(.not(operand.index)), operand.height + 1)
    }

    mutating func parsePrimary() throws(Failure) -> Parsed {
        let token = current
        switch token.kind {
        case .open:
            position += 1
            depth += 1
            guard depth <= Self.maximumDepth else { throw tooDeep(token) }
            let inner = try parseOr()
            switch current.kind {
            case .close: position += 1
            case .end: throw Failure(reason: "unclosed '('", column: token.start + 1)
            default: throw unexpected(current)
            }
            depth -= 1
            return inner
        case .number(let number):
            position += 1
            return (program.append(.literal(.number(number))), 0)
        case .string(let text):
            position += 1
            return (program.append(.literal(.string(text))), 0)
        case .variable(let name):
            guard let pathIndex = scope[name] else {
                throw Failure(reason: "unknown variable '$\(name)'", column: token.start + 1)
            }
            position += 1
            return (program.append(.variable(pathIndex: pathIndex)), 0)
        case .word("true"):
            position += 1
            return (program.append(.literal(.bool(true))), 0)
        case .word("false"):
            position += 1
            return (program.append(.literal(.bool(false))), 0)
        case .word("null"):
            position += 1
            return (program.append(.literal(.null)), 0)
        case .word("auth"):
            position += 1
            return (try parseAuthMembers(), 0)
        case .word(let name):
            throw Failure(reason: "unknown identifier '\(name)'", column: token.start + 1)
        default:
            throw unexpected(token)
        }
    }

    /// After `auth`: `(.name)*`.
    mutating func parseAuthMembers() throws(Failure) -> Int {
        var names: [String] = []
        var uidToken: Token?
        while current.kind == .dot {
            let dot = current
            position += 1
            guard case .word(let name) = current.kind else {
                throw Failure(reason: "expected a name after '.'", column: dot.start + 1)
            }
            if names.isEmpty, name == "uid" { uidToken = current }
            if names.count == 1, let uidToken {
                throw Failure(reason: "'auth.uid' is a string and has no member '\(name)'", column: uidToken.start + 1)
            }
            names.append(name)
            position += 1
        }
        if names.isEmpty { return program.append(.auth) }
        if uidToken != nil { return program.append(.authUID) }
        return program.append(.authClaim(names))
    }

    // MARK: Lexer

    struct Token {
        enum Kind: Equatable {
            case word(String)
            case variable(String)
            case number(Double)
            case string(String)
            case dot, not, equal, notEqual, and, or, open, close
            /// A lone `=`, `&` or `|`: always an unexpected token.
            case stray
            case end
        }

        var kind: Kind
        /// Byte offsets in the expression.
        var start: Int
        var end: Int
    }

    struct Lexer {
        let source: [UInt8]
        var index = 0

        static func isIdentifierStart(_ byte: UInt8) -> Bool {
            (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F
        }

        static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

        static func isIdentifierPart(_ byte: UInt8) -> Bool { isIdentifierStart(byte) || isDigit(byte) }

        func peek(_ offset: Int = 0) -> UInt8? {
            index + offset < source.count ? source[index + offset] : nil
        }

        mutating func next() throws(Failure) -> Token {
            while let byte = peek(), byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
            let start = index
            guard let byte = peek() else { return Token(kind: .end, start: start, end: start) }

            func token(_ kind: Token.Kind, length: Int) -> Token {
                index += length
                return Token(kind: kind, start: start, end: start + length)
            }

            switch byte {
            case UInt8(ascii: "("): return token(.open, length: 1)
            case UInt8(ascii: ")"): return token(.close, length: 1)
            case UInt8(ascii: "."): return token(.dot, length: 1)
            case UInt8(ascii: "!"):
                return peek(1) == UInt8(ascii: "=") ? token(.notEqual, length: 2) : token(.not, length: 1)
            case UInt8(ascii: "="):
                return peek(1) == UInt8(ascii: "=") ? token(.equal, length: 2) : token(.stray, length: 1)
            case UInt8(ascii: "&"):
                return peek(1) == UInt8(ascii: "&") ? token(.and, length: 2) : token(.stray, length: 1)
            case UInt8(ascii: "|"):
                return peek(1) == UInt8(ascii: "|") ? token(.or, length: 2) : token(.stray, length: 1)
            case UInt8(ascii: "'"), UInt8(ascii: "\""): return try string(quote: byte)
            case UInt8(ascii: "$"):
                index += 1
                while let part = peek(), Self.isIdentifierPart(part) { index += 1 }
                guard index > start + 1 else {
                    throw Failure(reason: "expected a variable name after '$'", column: start + 1)
                }
                let name = String(decoding: source[(start + 1)..<index], as: UTF8.self)
                return Token(kind: .variable(name), start: start, end: index)
            case UInt8(ascii: "-"):
                guard let following = peek(1), Self.isDigit(following) else { break }
                return try number()
            default:
                if Self.isDigit(byte) { return try number() }
                if Self.isIdentifierStart(byte) {
                    while let part = peek(), Self.isIdentifierPart(part) { index += 1 }
                    let name = String(decoding: source[start..<index], as: UTF8.self)
                    return Token(kind: .word(name), start: start, end: index)
                }
            }
            throw Failure(reason: "unexpected character '\(scalar(at: start))'", column: start + 1)
        }

        func scalar(at offset: Int) -> String {
            let lead = source[offset]
            let length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4
            return String(decoding: source[offset..<min(offset + length, source.count)], as: UTF8.self)
        }

        /// `-?digits(.digits)?([eE][+-]?digits)?`
        mutating func number() throws(Failure) -> Token {
            let start = index
            if peek() == UInt8(ascii: "-") { index += 1 }
            while let byte = peek(), Self.isDigit(byte) { index += 1 }
            if peek() == UInt8(ascii: ".") {
                index += 1
                guard let byte = peek(), Self.isDigit(byte) else {
                    throw Failure(reason: "invalid number", column: start + 1)
                }
                while let byte = peek(), Self.isDigit(byte) { index += 1 }
            }
            if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
                index += 1
                if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
                guard let byte = peek(), Self.isDigit(byte) else {
                    throw Failure(reason: "invalid number", column: start + 1)
                }
                while let byte = peek(), Self.isDigit(byte) { index += 1 }
            }
            guard let value = Double(String(decoding: source[start..<index], as: UTF8.self)) else {
                throw Failure(reason: "invalid number", column: start + 1)
            }
            return Token(kind: .number(value), start: start, end: index)
        }

        mutating func hex4() -> UInt32? {
            guard index + 4 <= source.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = source[index]
                let digit: UInt32
                switch byte {
                case 0x30...0x39: digit = UInt32(byte - 0x30)
                case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
                case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
                default: return nil
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        /// A single- or double-quoted string with backslash escapes
        /// (`\\ \' \" \/ \b \f \n \r \t \uXXXX`, surrogate pairs combined).
        mutating func string(quote: UInt8) throws(Failure) -> Token {
            let start = index
            index += 1
            var bytes: [UInt8] = []
            while let byte = peek() {
                if byte == quote {
                    index += 1
                    return Token(kind: .string(String(decoding: bytes, as: UTF8.self)), start: start, end: index)
                }
                guard byte == UInt8(ascii: "\\") else {
                    bytes.append(byte)
                    index += 1
                    continue
                }
                let escapeStart = index
                index += 1
                guard let escaped = peek() else { break }
                index += 1
                switch escaped {
                case UInt8(ascii: "\\"), UInt8(ascii: "'"), UInt8(ascii: "\""), UInt8(ascii: "/"): bytes.append(escaped)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"):
                    let invalid = Failure(reason: "invalid \\u escape", column: escapeStart + 1)
                    guard var code = hex4() else { throw invalid }
                    if (0xD800...0xDBFF).contains(code) {
                        guard peek() == UInt8(ascii: "\\"), peek(1) == UInt8(ascii: "u") else { throw invalid }
                        index += 2
                        guard let low = hex4(), (0xDC00...0xDFFF).contains(low) else { throw invalid }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw invalid }
                    bytes.append(contentsOf: scalar.utf8)
                default:
                    throw Failure(reason: "invalid escape '\\\(scalar(at: escapeStart + 1))'", column: escapeStart + 1)
                }
            }
            throw Failure(reason: "unterminated string", column: start + 1)
        }
    }
}
