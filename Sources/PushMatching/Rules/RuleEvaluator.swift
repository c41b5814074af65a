import PushCore
import PushJSON

/// A value while a read rule is evaluated.
enum RuleValue: Equatable {
    case null
    case boolean(Bool)
    case number(Double)
    case string(String)
    /// The data at a path (what `root`, `data`, `child()` and `parent()` give).
    case snapshot(Path)
    /// An object: `auth`, a claim, or the value of a snapshot with children.
    case object(JSONObject)
    case array([RuleValue])

    init(_ json: JSON?) {
        switch json {
        case nil, .null?: self = .null
        case .bool(let value)?: self = .boolean(value)
        case .int(let value)?: self = .number(Double(value))
        case .double(let value)?: self = .number(value)
        case .string(let text)?: self = .string(text)
        case .object(let object)?: self = .object(object)
        case .array(let items)?: self = .array(items.map { RuleValue($0) })
        }
    }

    var kind: String {
        switch self {
        case .null: "null"
        case .boolean: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .snapshot: "a snapshot"
        case .object: "an object"
        case .array: "a list"
        }
    }
}

/// Evaluation failed: the rule is false (SPEC §12.4); the message says why (the simulator
/// prints it).
struct RuleFailure: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Evaluates one `.read` expression against a data tree, remembering every path whose data it
/// read (a write at, above or below one of them may change the answer).
///
/// Bounded: at most ``stepBudget`` steps per decision (shared by the rules of one cascade)
/// and strings of at most ``maxStringBytes``, so a hostile rule cannot hold the service.
struct RuleEvaluator {
    static let stepBudget = 20_000
    static let maxStringBytes = 65_536

    let tree: DataTree
    let auth: RuleValue
    let now: Int64
    var steps = 0
    var reads: Set<Path> = []

    init(tree: DataTree, auth: JSON?, now: Int64) {
        self.tree = tree
        self.auth = RuleValue(auth)
        self.now = now
    }

    /// Whether `expression`, the rule of the node at `data` with the captures `bindings`, grants.
    mutating func grants(_ expression: RuleExpression, data: Path, bindings: [String: String]) throws(RuleFailure) -> Bool {
        let value = try evaluate(expression, data: data, bindings: bindings)
        guard case .boolean(let granted) = value else { throw RuleFailure("the rule gives \(value.kind), not a boolean") }
        return granted
    }

    mutating func evaluate(_ expression: RuleExpression, data: Path, bindings: [String: String]) throws(RuleFailure) -> RuleValue {
        steps += 1
        guard steps <= Self.stepBudget else { throw RuleFailure("the evaluation took more than \(Self.stepBudget) steps") }
        switch expression {
        case .null: return .null
        case .boolean(let value): return .boolean(value)
        case .number(let value): return .number(value)
        case .string(let text): return .string(text)
        case .array(let items):
            var values: [RuleValue] = []
            for item in items { values.append(try evaluate(item, data: data, bindings: bindings)) }
            return .array(values)
        case .variable(let variable):
            switch variable {
            case .auth: return auth
            case .now: return .number(Double(now))
            case .root: return .snapshot(.root)
            case .data: return .snapshot(data)
            case .captured(let name):
                guard let key = bindings[name] else { throw RuleFailure("\(name) is not bound") }
                return .string(key)
            }
        case .member(let base, let name):
            return try member(try evaluate(base, data: data, bindings: bindings), name)
        case .call(let receiver, let method, let arguments):
            let target = try evaluate(receiver, data: data, bindings: bindings)
            var values: [RuleValue] = []
            for argument in arguments { values.append(try evaluate(argument, data: data, bindings: bindings)) }
            return try call(target, method, values)
        case .unary(let op, let operand):
            let value = try evaluate(operand, data: data, bindings: bindings)
            switch (op, value) {
            case (.not, .boolean(let flag)): return .boolean(!flag)
            case (.negate, .number(let number)): return .number(-number)
            default: throw RuleFailure("\(op.rawValue) does not apply to \(value.kind)")
            }
        case .binary(let op, let leftExpression, let rightExpression):
            let left = try evaluate(leftExpression, data: data, bindings: bindings)
            if op == .and || op == .or {
                guard case .boolean(let flag) = left else { throw RuleFailure("\(op.rawValue) needs booleans, not \(left.kind)") }
                if op == .and && !flag { return .boolean(false) }
                if op == .or && flag { return .boolean(true) }
                let right = try evaluate(rightExpression, data: data, bindings: bindings)
                guard case .boolean = right else { throw RuleFailure("\(op.rawValue) needs booleans, not \(right.kind)") }
                return right
            }
            return try binary(op, left, try evaluate(rightExpression, data: data, bindings: bindings))
        case .conditional(let condition, let then, let otherwise):
            let test = try evaluate(condition, data: data, bindings: bindings)
            guard case .boolean(let flag) = test else { throw RuleFailure("?: needs a boolean condition, not \(test.kind)") }
            return try evaluate(flag ? then : otherwise, data: data, bindings: bindings)
        }
    }

    func member(_ value: RuleValue, _ name: String) throws(RuleFailure) -> RuleValue {
        switch value {
        case .object(let object): return RuleValue(object[Key(name)])
        case .string(let text) where name == "length": return .number(Double(text.utf16.count))
        case .snapshot: throw RuleFailure("a snapshot has no member \(name); use .child('\(name)').val()")
        default: throw RuleFailure("\(value.kind) has no member \(name)")
        }
    }

    /// Reads the data at `path` (remembered).
    mutating func read(_ path: Path) -> JSON? {
        reads.insert(path)
        return tree.value(at: path)
    }

    static func childPath(_ base: Path, _ argument: RuleValue) throws(RuleFailure) -> Path {
        guard case .string(let relative) = argument else { throw RuleFailure("a child path must be a string, not \(argument.kind)") }
        var keys: [Key] = []
        for segment in relative.split(separator: "/", omittingEmptySubsequences: true) {
            let key = Key(String(segment))
            do {
                try Path.validateKey(key)
            } catch {
                throw RuleFailure("child path \(RuleExpressionParser.quoted(String(relative.prefix(100)))): \(error)")
            }
            keys.append(key)
        }
        let path = base.appending(keys)
        guard path.string.utf8.count <= Path.maxBytes else { throw RuleFailure("a child path beyond \(Path.maxBytes) bytes") }
        return path
    }

    mutating func call(_ target: RuleValue, _ method: RuleMethod, _ arguments: [RuleValue]) throws(RuleFailure) -> RuleValue {
        switch (target, method) {
        case (.snapshot(let path), .child):
            return .snapshot(try Self.childPath(path, arguments[0]))
        case (.snapshot(let path), .parent):
            guard let parent = path.parent else { throw RuleFailure("the root has no parent") }
            return .snapshot(parent)
        case (.snapshot(let path), .val):
            return RuleValue(read(path))
        case (.snapshot(let path), .exists):
            return .boolean(read(path) != nil)
        case (.snapshot(let path), .hasChild):
            return .boolean(read(try Self.childPath(path, arguments[0])) != nil)
        case (.snapshot(let path), .hasChildren):
            guard let names = arguments.first else {
                if case .object(let object)? = read(path) { return .boolean(!object.isEmpty) }
                return .boolean(false)
            }
            guard case .array(let list) = names else { throw RuleFailure("hasChildren() takes a list of child names, not \(names.kind)") }
            var all = true
            for name in list where read(try Self.childPath(path, name)) == nil { all = false }
            return .boolean(all)
        case (.snapshot(let path), .isString):
            if case .string? = read(path) { return .boolean(true) }
            return .boolean(false)
        case (.snapshot(let path), .isNumber):
            switch read(path) {
            case .int?, .double?: return .boolean(true)
            default: return .boolean(false)
            }
        case (.snapshot(let path), .isBoolean):
            if case .bool? = read(path) { return .boolean(true) }
            return .boolean(false)
        case (.string(let text), .contains), (.string(let text), .beginsWith), (.string(let text), .endsWith):
            guard case .string(let other) = arguments[0] else { throw RuleFailure("\(method.rawValue)() takes a string, not \(arguments[0].kind)") }
            let (haystack, needle) = (Array(text.utf8), Array(other.utf8))
            switch method {
            case .beginsWith: return .boolean(haystack.starts(with: needle))
            case .endsWith: return .boolean(haystack.count >= needle.count && Array(haystack.suffix(needle.count)) == needle)
            default: return .boolean(needle.isEmpty || Self.find(needle, in: haystack, from: 0) != nil)
            }
        case (.string(let text), .replace):
            guard case .string(let old) = arguments[0], case .string(let new) = arguments[1] else {
                throw RuleFailure("replace() takes two strings")
            }
            return .string(try Self.replacing(text, old, new))
        case (.string(let text), .toLowerCase):
            return .string(text.lowercased())
        case (.string(let text), .toUpperCase):
            return .string(text.uppercased())
        default:
            throw RuleFailure("\(method.rawValue)() does not apply to \(target.kind)")
        }
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count else { return nil }
        var i = start
        while i + needle.count <= haystack.count {
            if haystack[i] == needle[0] && haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }

    /// Every occurrence of `old` replaced (bytes), the result bounded.
    static func replacing(_ text: String, _ old: String, _ new: String) throws(RuleFailure) -> String {
        let (haystack, needle, replacement) = (Array(text.utf8), Array(old.utf8), Array(new.utf8))
        if needle.isEmpty { return text }
        var out: [UInt8] = []
        var i = 0
        while let found = find(needle, in: haystack, from: i) {
            out += haystack[i..<found]
            out += replacement
            guard out.count <= maxStringBytes else { throw RuleFailure("a string beyond \(maxStringBytes) bytes") }
            i = found + needle.count
        }
        out += haystack[i...]
        guard out.count <= maxStringBytes else { throw RuleFailure("a string beyond \(maxStringBytes) bytes") }
        return String(decoding: out, as: UTF8.self)
    }

    func binary(_ op: RuleBinaryOperator, _ left: RuleValue, _ right: RuleValue) throws(RuleFailure) -> RuleValue {
        switch op {
        case .equal: return .boolean(try Self.equal(left, right))
        case .notEqual: return .boolean(!(try Self.equal(left, right)))
        case .add:
            switch (left, right) {
            case (.number(let a), .number(let b)): return try Self.finite(a + b)
            case (.string, _), (_, .string):
                let joined = try Self.text(left) + Self.text(right)
                guard joined.utf8.count <= Self.maxStringBytes else { throw RuleFailure("a string beyond \(Self.maxStringBytes) bytes") }
                return .string(joined)
            default: throw RuleFailure("+ does not apply to \(left.kind) and \(right.kind)")
            }
        case .subtract, .multiply, .divide, .remainder:
            guard case .number(let a) = left, case .number(let b) = right else {
                throw RuleFailure("\(op.rawValue) needs numbers, not \(left.kind) and \(right.kind)")
            }
            switch op {
            case .subtract: return try Self.finite(a - b)
            case .multiply: return try Self.finite(a * b)
            case .divide:
                guard b != 0 else { throw RuleFailure("division by zero") }
                return try Self.finite(a / b)
            default:
                guard b != 0 else { throw RuleFailure("remainder of a division by zero") }
                return try Self.finite(a.truncatingRemainder(dividingBy: b))
            }
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            let order: Int
            switch (left, right) {
            case (.number(let a), .number(let b)): order = a < b ? -1 : (a > b ? 1 : 0)
            case (.string(let a), .string(let b)): order = lexicographicCompareUTF8(a, b)
            default: throw RuleFailure("\(op.rawValue) compares two numbers or two strings, not \(left.kind) and \(right.kind)")
            }
            switch op {
            case .less: return .boolean(order < 0)
            case .lessOrEqual: return .boolean(order <= 0)
            case .greater: return .boolean(order > 0)
            default: return .boolean(order >= 0)
            }
        case .and, .or:
            throw RuleFailure("\(op.rawValue) is evaluated lazily")
        }
    }

    static func finite(_ value: Double) throws(RuleFailure) -> RuleValue {
        guard value.isFinite else { throw RuleFailure("the arithmetic left the finite numbers") }
        return .number(value)
    }

    /// A value joined into a string by `+`.
    static func text(_ value: RuleValue) throws(RuleFailure) -> String {
        switch value {
        case .string(let text): return text
        case .boolean(let flag): return flag ? "true" : "false"
        case .number(let number):
            var writer = JSONWriter(capacity: 32)
            writer.write(.double(number))
            return String(decoding: writer.bytes, as: UTF8.self)
        default: throw RuleFailure("+ cannot join \(value.kind) to a string")
        }
    }

    /// `==`: strict, as `===` (SPEC §12.3): values of different types are different.
    static func equal(_ left: RuleValue, _ right: RuleValue) throws(RuleFailure) -> Bool {
        switch (left, right) {
        case (.null, .null): return true
        case (.boolean(let a), .boolean(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return utf8Equal(a, b)
        case (.object(let a), .object(let b)): return JSON.object(a) == JSON.object(b)
        case (.array(let a), .array(let b)):
            guard a.count == b.count else { return false }
            for (x, y) in zip(a, b) where !(try equal(x, y)) { return false }
            return true
        case (.snapshot, _), (_, .snapshot):
            throw RuleFailure("a snapshot cannot be compared; compare its .val()")
        default: return false
        }
    }
}
