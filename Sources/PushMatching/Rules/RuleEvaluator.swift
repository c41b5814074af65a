import PushCore
import PushJSON

/// A value while a read rule is evaluated.
enum RuleValue: Equatable {
    case null
    case boolean(Bool)
    case number(Double)
    /// A whole number as the data, a claim or the rule wrote it: compared and added exactly
    /// (a token's `id` of 2^53 + 1 is not the 2^53 a node holds; doubles cannot tell them
    /// apart).
    case integer(Int64)
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
        case .int(let value)?: self = .integer(value)
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
        case .number, .integer: "a number"
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
/// Bounded: at most ``stepBudget`` steps and ``byteBudget`` bytes of strings touched per
/// decision (shared by the rules of one cascade), strings made of at most ``maxStringBytes``,
/// and searches in linear time, so a hostile rule (or hostile data under a plain one) cannot
/// hold the service: a step that searches a 4 MiB string costs its 4 MiB (issue 33: one access
/// check took 0.81 s with `contains` over 4 MiB of data and a 760-byte key).
struct RuleEvaluator {
    static let stepBudget = 20_000
    static let maxStringBytes = 65_536
    static let byteBudget = 8 << 20

    let tree: DataTree
    let auth: RuleValue
    let now: Int64
    var steps = 0
    /// Bytes of strings searched, compared, copied or made so far.
    var bytes = 0
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
        case .integer(let value): return .integer(value)
        case .string(let text): return .string(text)
        case .array(let items):
            var values: [RuleValue] = []
            for item in items { values.append(try evaluate(item, data: data, bindings: bindings)) }
            return .array(values)
        case .variable(let variable):
            switch variable {
            case .auth: return auth
            case .now: return .integer(now)
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
            case (.negate, .integer(let number)): return number == .min ? .number(-Double(number)) : .integer(-number)
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
            let right = try evaluate(rightExpression, data: data, bindings: bindings)
            if case .string(let a) = left, case .string(let b) = right { try charge(min(a.utf8.count, b.utf8.count) + 1) }
            return try binary(op, left, right)
        case .conditional(let condition, let then, let otherwise):
            let test = try evaluate(condition, data: data, bindings: bindings)
            guard case .boolean(let flag) = test else { throw RuleFailure("?: needs a boolean condition, not \(test.kind)") }
            return try evaluate(flag ? then : otherwise, data: data, bindings: bindings)
        }
    }

    /// Counts `count` bytes touched against ``byteBudget``.
    mutating func charge(_ count: Int) throws(RuleFailure) {
        bytes = bytes.addingReportingOverflow(count).partialValue
        guard bytes >= 0, bytes <= Self.byteBudget else {
            throw RuleFailure("the evaluation touched more than \(Self.byteBudget >> 20) MiB of strings")
        }
    }

    func member(_ value: RuleValue, _ name: String) throws(RuleFailure) -> RuleValue {
        switch value {
        case .object(let object): return RuleValue(object[Key(name)])
        case .string(let text) where name == "length": return .integer(Int64(text.utf16.count))
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
            switch method {
            case .beginsWith:
                try charge(other.utf8.count)
                return .boolean(text.utf8.starts(with: other.utf8))
            case .endsWith:
                try charge(other.utf8.count)
                return .boolean(text.utf8.count >= other.utf8.count && text.utf8.suffix(other.utf8.count).elementsEqual(other.utf8))
            default:
                try charge(text.utf8.count + other.utf8.count)
                let needle = Array(other.utf8)
                return .boolean(needle.isEmpty || Self.find(needle, in: Array(text.utf8), from: 0) != nil)
            }
        case (.string(let text), .replace):
            guard case .string(let old) = arguments[0], case .string(let new) = arguments[1] else {
                throw RuleFailure("replace() takes two strings")
            }
            try charge(text.utf8.count + old.utf8.count)
            let replaced = try Self.replacing(text, old, new)
            try charge(replaced.utf8.count)
            return .string(replaced)
        case (.string(let text), .toLowerCase), (.string(let text), .toUpperCase):
            // Case mapping can grow a string (ß → SS): bounded before and after.
            guard text.utf8.count <= Self.maxStringBytes else { throw RuleFailure("\(method.rawValue)() of a string beyond \(Self.maxStringBytes) bytes") }
            try charge(text.utf8.count)
            let mapped = method == .toLowerCase ? text.lowercased() : text.uppercased()
            guard mapped.utf8.count <= Self.maxStringBytes else { throw RuleFailure("a string beyond \(Self.maxStringBytes) bytes") }
            try charge(mapped.utf8.count)
            return .string(mapped)
        default:
            throw RuleFailure("\(method.rawValue)() does not apply to \(target.kind)")
        }
    }

    /// Where `needle` first occurs in `haystack` at or after `start`: Knuth–Morris–Pratt, in
    /// time linear in both (a naive search is their product: 3·10⁹ byte comparisons for a
    /// 760-byte key in 4 MiB).
    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, start >= 0, haystack.count - start >= needle.count else { return nil }
        var failure = [Int](repeating: 0, count: needle.count)
        var k = 0
        for i in 1..<max(1, needle.count) {
            while k > 0 && needle[i] != needle[k] { k = failure[k - 1] }
            if needle[i] == needle[k] { k += 1 }
            failure[i] = k
        }
        var matched = 0
        var i = start
        while i < haystack.count {
            while matched > 0 && haystack[i] != needle[matched] { matched = failure[matched - 1] }
            if haystack[i] == needle[matched] { matched += 1 }
            if matched == needle.count { return i - needle.count + 1 }
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
            case (.integer(let a), .integer(let b)):
                let (sum, overflow) = a.addingReportingOverflow(b)
                return overflow ? try Self.finite(Double(a) + Double(b)) : .integer(sum)
            case (.number, .number), (.number, .integer), (.integer, .number):
                return try Self.finite(Self.double(left)! + Self.double(right)!)
            case (.string, _), (_, .string):
                let (a, b) = (try Self.text(left), try Self.text(right))
                guard a.utf8.count + b.utf8.count <= Self.maxStringBytes else { throw RuleFailure("a string beyond \(Self.maxStringBytes) bytes") }
                let joined = a + b
                return .string(joined)
            default: throw RuleFailure("+ does not apply to \(left.kind) and \(right.kind)")
            }
        case .subtract, .multiply, .divide, .remainder:
            if case .integer(let x) = left, case .integer(let y) = right, let exact = try Self.integerArithmetic(op, x, y) { return exact }
            guard let a = Self.double(left), let b = Self.double(right) else {
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
            case (.number, .number), (.number, .integer), (.integer, .number), (.integer, .integer): order = Self.compare(left, right)
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

    /// A number as a double (`nil` for anything else).
    static func double(_ value: RuleValue) -> Double? {
        switch value {
        case .number(let number): number
        case .integer(let number): Double(number)
        default: nil
        }
    }

    /// `-`, `*`, `/`, `%` of two integers when the result is an integer that fits (`nil`: the
    /// doubles' answer, as JavaScript's).
    static func integerArithmetic(_ op: RuleBinaryOperator, _ a: Int64, _ b: Int64) throws(RuleFailure) -> RuleValue? {
        switch op {
        case .subtract:
            let (difference, overflow) = a.subtractingReportingOverflow(b)
            return overflow ? nil : .integer(difference)
        case .multiply:
            let (product, overflow) = a.multipliedReportingOverflow(by: b)
            return overflow ? nil : .integer(product)
        case .divide:
            guard b != 0 else { throw RuleFailure("division by zero") }
            guard !(a == .min && b == -1), a % b == 0 else { return nil }
            return .integer(a / b)
        case .remainder:
            guard b != 0 else { throw RuleFailure("remainder of a division by zero") }
            return .integer(b == -1 ? 0 : a % b)
        default:
            return nil
        }
    }

    /// The order of two numbers, exactly: an integer and a double are compared as the numbers
    /// they are, not after rounding the integer to a double.
    static func compare(_ left: RuleValue, _ right: RuleValue) -> Int {
        switch (left, right) {
        case (.integer(let a), .integer(let b)): return a < b ? -1 : (a > b ? 1 : 0)
        case (.integer(let a), .number(let b)): return compare(a, b)
        case (.number(let a), .integer(let b)): return -compare(b, a)
        case (.number(let a), .number(let b)): return a < b ? -1 : (a > b ? 1 : 0)
        default: return 0
        }
    }

    /// The order of an integer and a finite double, exactly.
    static func compare(_ a: Int64, _ b: Double) -> Int {
        // 2^63 as a double; every double at or beyond it is above any Int64.
        if b >= 9_223_372_036_854_775_808.0 { return -1 }
        if b < -9_223_372_036_854_775_808.0 { return 1 }
        let whole = b.rounded(.towardZero)
        let integral = Int64(whole)
        if a != integral { return a < integral ? -1 : 1 }
        let fraction = b - whole
        return fraction > 0 ? -1 : (fraction < 0 ? 1 : 0)
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
        case .integer(let number): return String(number)
        default: throw RuleFailure("+ cannot join \(value.kind) to a string")
        }
    }

    /// `==`: strict, as `===` (SPEC §12.3): values of different types are different.
    static func equal(_ left: RuleValue, _ right: RuleValue) throws(RuleFailure) -> Bool {
        switch (left, right) {
        case (.null, .null): return true
        case (.boolean(let a), .boolean(let b)): return a == b
        case (.number, .number), (.number, .integer), (.integer, .number), (.integer, .integer): return compare(left, right) == 0
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
