import PushCore

/// Parses a `.read` expression (SPEC §12.3): literals, `auth`, `now`, `root`, `data`, the `$`
/// variables captured on the way to the rule, snapshot and string methods, the operators with
/// their usual precedence. Anything else is refused with the column where it starts and what is
/// supported instead, so that a rule the service would misread never loads.
///
/// Bounded: at most ``maxLength`` bytes and ``maxDepth`` levels of nesting.
struct RuleExpressionParser {
    static let maxLength = 4_096
    static let maxDepth = 64

    enum Token: Equatable {
        case number(Double)
        case integer(Int64)
        case string(String)
        case identifier(String)
        case punctuation(String)
        case end
    }

    let rule: String
    /// The `$` variables captured on the way to the rule.
    let captured: Set<String>
    var tokens: [(token: Token, column: Int)] = []
    var index = 0
    var depth = 0

    /// Parses `text`, the expression of the rule at `rule`.
    static func parse(_ text: String, rule: String, captured: Set<String>) throws(RulesError) -> RuleExpression {
        guard text.utf8.count <= maxLength else {
            throw RulesError(rule: rule, "the expression is \(text.utf8.count) bytes; at most \(maxLength)")
        }
        var parser = RuleExpressionParser(rule: rule, captured: captured)
        parser.tokens = try tokenize(Array(text.unicodeScalars), rule: rule)
        let expression = try parser.expression()
        guard case .end = parser.current else {
            throw parser.error("unexpected \(parser.describe(parser.current)) after a complete expression")
        }
        return expression
    }

    // MARK: - Tokens

    static func tokenize(_ scalars: [Unicode.Scalar], rule: String) throws(RulesError) -> [(Token, Int)] {
        var tokens: [(Token, Int)] = []
        var i = 0
        func fail(_ message: String, at column: Int) -> RulesError { RulesError(rule: rule, column: column, message) }
        while i < scalars.count {
            let c = scalars[i]
            let column = i + 1
            if c == " " || c == "\t" || c == "\n" || c == "\r" {
                i += 1
                continue
            }
            if isDigit(c) || (c == "." && i + 1 < scalars.count && isDigit(scalars[i + 1])) {
                var j = i
                while j < scalars.count && isDigit(scalars[j]) { j += 1 }
                if j < scalars.count && scalars[j] == "." {
                    j += 1
                    while j < scalars.count && isDigit(scalars[j]) { j += 1 }
                }
                if j < scalars.count && (scalars[j] == "e" || scalars[j] == "E") {
                    var k = j + 1
                    if k < scalars.count && (scalars[k] == "+" || scalars[k] == "-") { k += 1 }
                    guard k < scalars.count && isDigit(scalars[k]) else { throw fail("a number's exponent has no digits", at: j + 1) }
                    while k < scalars.count && isDigit(scalars[k]) { k += 1 }
                    j = k
                }
                let text = String(String.UnicodeScalarView(scalars[i..<j]))
                if let integer = Int64(text) {
                    // Digits alone, within 64 bits: an integer, compared exactly (2^53 + 1 is
                    // not 2^53).
                    tokens.append((.integer(integer), column))
                    i = j
                    continue
                }
                guard let value = Double(text), value.isFinite else { throw fail("\(text) is not a finite number", at: column) }
                tokens.append((.number(value), column))
                i = j
                continue
            }
            if c == "'" || c == "\"" {
                var text = String.UnicodeScalarView()
                var j = i + 1
                var closed = false
                while j < scalars.count {
                    let d = scalars[j]
                    if d == c {
                        closed = true
                        break
                    }
                    if d == "\\" {
                        guard j + 1 < scalars.count else { break }
                        let e = scalars[j + 1]
                        switch e {
                        case "\\", "'", "\"", "/": text.append(e)
                        case "n": text.append("\n")
                        case "t": text.append("\t")
                        case "r": text.append("\r")
                        case "u":
                            guard j + 5 < scalars.count,
                                let code = UInt32(String(String.UnicodeScalarView(scalars[(j + 2)...(j + 5)])), radix: 16),
                                let scalar = Unicode.Scalar(code)
                            else { throw fail("\\u must be followed by four hex digits of a Unicode scalar", at: j + 1) }
                            text.append(scalar)
                            j += 4
                        default:
                            throw fail("unknown escape \\\(e) in a string", at: j + 1)
                        }
                        j += 2
                        continue
                    }
                    text.append(d)
                    j += 1
                }
                guard closed else { throw fail("the string opened here is not closed", at: column) }
                tokens.append((.string(String(text)), column))
                i = j + 1
                continue
            }
            if isIdentifierStart(c) {
                var j = i + 1
                while j < scalars.count && isIdentifierPart(scalars[j]) { j += 1 }
                tokens.append((.identifier(String(String.UnicodeScalarView(scalars[i..<j]))), column))
                i = j
                continue
            }
            let rest = scalars[i...]
            var matched: String?
            for candidate in ["===", "!==", "==", "!=", "<=", ">=", "&&", "||"] where rest.starts(with: candidate.unicodeScalars) {
                matched = candidate
                break
            }
            if matched == nil, "()[],.?:!-+*/%<>".unicodeScalars.contains(c) { matched = String(c) }
            if let matched {
                tokens.append((.punctuation(matched), column))
                i += matched.unicodeScalars.count
                continue
            }
            if c == "=" || c == "&" || c == "|" {
                let doubled = c == "=" ? "== (or ===)" : "\(c)\(c)"
                throw fail("\(c) alone is not an operator; did you mean \(doubled)?", at: column)
            }
            throw fail("unexpected character \(quoted(String(c)))", at: column)
        }
        tokens.append((.end, scalars.count + 1))
        return tokens
    }

    static func isDigit(_ c: Unicode.Scalar) -> Bool { c >= "0" && c <= "9" }
    static func isIdentifierStart(_ c: Unicode.Scalar) -> Bool { (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c == "_" || c == "$" }
    static func isIdentifierPart(_ c: Unicode.Scalar) -> Bool { isIdentifierStart(c) || isDigit(c) }

    static func quoted(_ text: String) -> String { "'" + text + "'" }

    // MARK: - Grammar

    var current: Token { tokens[index].token }
    var column: Int { tokens[index].column }

    func error(_ message: String, at column: Int? = nil) -> RulesError {
        RulesError(rule: rule, column: column ?? self.column, message)
    }

    func describe(_ token: Token) -> String {
        switch token {
        case .number(let value): "number \(value)"
        case .integer(let value): "number \(value)"
        case .string(let text): "string \(Self.quoted(text))"
        case .identifier(let name): name
        case .punctuation(let text): Self.quoted(text)
        case .end: "the end of the expression"
        }
    }

    mutating func advance() { if index < tokens.count - 1 { index += 1 } }

    mutating func accept(_ punctuation: String) -> Bool {
        if current == .punctuation(punctuation) {
            advance()
            return true
        }
        return false
    }

    mutating func expect(_ punctuation: String, _ what: String) throws(RulesError) {
        guard accept(punctuation) else { throw error("expected \(Self.quoted(punctuation)) \(what), found \(describe(current))") }
    }

    mutating func nested<T>(_ body: (inout RuleExpressionParser) throws(RulesError) -> T) throws(RulesError) -> T {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maxDepth else { throw error("the expression nests more than \(Self.maxDepth) levels") }
        return try body(&self)
    }

    mutating func expression() throws(RulesError) -> RuleExpression {
        try nested { (parser: inout RuleExpressionParser) throws(RulesError) in
            let condition = try parser.binary(level: 0)
            guard parser.accept("?") else { return condition }
            let then = try parser.expression()
            try parser.expect(":", "between the branches of ?:")
            let otherwise = try parser.expression()
            return .conditional(condition, then, otherwise)
        }
    }

    /// Binary operators by precedence, loosest first.
    static let levels: [[(String, RuleBinaryOperator)]] = [
        [("||", .or)],
        [("&&", .and)],
        [("===", .equal), ("!==", .notEqual), ("==", .equal), ("!=", .notEqual)],
        [("<=", .lessOrEqual), (">=", .greaterOrEqual), ("<", .less), (">", .greater)],
        [("+", .add), ("-", .subtract)],
        [("*", .multiply), ("/", .divide), ("%", .remainder)],
    ]

    mutating func binary(level: Int) throws(RulesError) -> RuleExpression {
        if level == Self.levels.count { return try unary() }
        var left = try binary(level: level + 1)
        while true {
            guard case .punctuation(let text) = current, let op = Self.levels[level].first(where: { $0.0 == text })?.1 else { return left }
            advance()
            let right = try nested { (parser: inout RuleExpressionParser) throws(RulesError) in try parser.binary(level: level + 1) }
            left = .binary(op, left, right)
        }
    }

    mutating func unary() throws(RulesError) -> RuleExpression {
        if accept("!") { return .unary(.not, try nested { (parser: inout RuleExpressionParser) throws(RulesError) in try parser.unary() }) }
        if accept("-") { return .unary(.negate, try nested { (parser: inout RuleExpressionParser) throws(RulesError) in try parser.unary() }) }
        return try postfix()
    }

    mutating func postfix() throws(RulesError) -> RuleExpression {
        var value = try primary()
        while true {
            if current == .punctuation("[") {
                throw error("brackets are not supported; use .child(path) for a snapshot's child, or .name for a member")
            }
            if current == .punctuation("(") {
                throw error("only the methods of snapshots and strings can be called (receiver.method(…))")
            }
            guard accept(".") else { return value }
            let nameColumn = column
            guard case .identifier(let name) = current else { throw error("expected a member or method name after '.', found \(describe(current))") }
            advance()
            guard current == .punctuation("(") else {
                value = .member(value, name)
                continue
            }
            guard let method = RuleMethod(rawValue: name) else {
                throw error(Self.unsupportedMethod(name), at: nameColumn)
            }
            advance()
            var arguments: [RuleExpression] = []
            if !accept(")") {
                repeat {
                    arguments.append(try expression())
                } while accept(",")
                try expect(")", "to close the arguments of \(name)()")
            }
            guard method.arity.contains(arguments.count) else {
                let expected = method.arity.lowerBound == method.arity.upperBound ? "\(method.arity.lowerBound)" : "\(method.arity.lowerBound) or \(method.arity.upperBound)"
                throw error("\(name)() takes \(expected) argument\(method.arity.upperBound == 1 ? "" : "s"), not \(arguments.count)", at: nameColumn)
            }
            value = .call(value, method, arguments)
        }
    }

    static func unsupportedMethod(_ name: String) -> String {
        let supported = "snapshots: child, parent, val, exists, hasChild, hasChildren, isString, isNumber, isBoolean; strings: contains, beginsWith, endsWith, replace, toLowerCase, toUpperCase"
        switch name {
        case "matches": return "matches() is not supported: read rules have no regular expressions (supported: \(supported))"
        case "getPriority": return "getPriority() is not supported: the service keeps no priorities (supported: \(supported))"
        default: return "unknown method \(name)() (supported: \(supported))"
        }
    }

    mutating func primary() throws(RulesError) -> RuleExpression {
        let start = column
        switch current {
        case .number(let value):
            advance()
            return .number(value)
        case .integer(let value):
            advance()
            return .integer(value)
        case .string(let text):
            advance()
            return .string(text)
        case .identifier(let name):
            advance()
            switch name {
            case "true": return .boolean(true)
            case "false": return .boolean(false)
            case "null": return .null
            case "auth": return .variable(.auth)
            case "now": return .variable(.now)
            case "root": return .variable(.root)
            case "data": return .variable(.data)
            case "newData": throw error("newData is for .write and .validate rules; a read rule sees data and root", at: start)
            case "query": throw error("query-based rules are not supported: a subscription reads a node, not a query", at: start)
            default:
                if name.hasPrefix("$") {
                    guard captured.contains(name) else {
                        let known = captured.isEmpty ? "none is" : captured.sorted().joined(separator: ", ") + (captured.count == 1 ? " is" : " are")
                        throw error("\(name) is not captured on the way to this rule (\(known))", at: start)
                    }
                    return .variable(.captured(name))
                }
                throw error("unknown variable \(name); read rules know auth, now, root, data and the $ variables captured on the way", at: start)
            }
        case .punctuation("("):
            advance()
            let inner = try expression()
            try expect(")", "to close the parenthesis opened at column \(start)")
            return inner
        case .punctuation("["):
            advance()
            var items: [RuleExpression] = []
            if !accept("]") {
                repeat {
                    items.append(try expression())
                } while accept(",")
                try expect("]", "to close the list opened at column \(start)")
            }
            return .array(items)
        case .punctuation("/"):
            throw error("regular expressions are not supported in read rules")
        case .end:
            throw error("the expression ends where a value was expected")
        default:
            throw error("expected a value, found \(describe(current))")
        }
    }
}
