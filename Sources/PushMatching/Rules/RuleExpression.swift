import PushCore

/// A `.read` expression, parsed (SPEC §12.3): the subset of the Firebase Realtime Database
/// rules language that read rules need.
public indirect enum RuleExpression: Sendable, Equatable {
    case null
    case boolean(Bool)
    case number(Double)
    /// An integer literal (no fraction, no exponent) that fits 64 bits: compared exactly.
    case integer(Int64)
    case string(String)
    /// `[a, b]` (the argument of `hasChildren`).
    case array([RuleExpression])
    case variable(RuleVariable)
    /// `object.name`: a member of an object (`auth.token.admin`), or a string's `length`.
    case member(RuleExpression, String)
    /// `receiver.method(arguments)`: a snapshot's or a string's method.
    case call(RuleExpression, RuleMethod, [RuleExpression])
    case unary(RuleUnaryOperator, RuleExpression)
    case binary(RuleBinaryOperator, RuleExpression, RuleExpression)
    case conditional(RuleExpression, RuleExpression, RuleExpression)

    /// Whether it uses `now`: its answer can change with time alone.
    public var readsNow: Bool {
        switch self {
        case .null, .boolean, .number, .integer, .string: false
        case .variable(let variable): variable == .now
        case .array(let items): items.contains(where: \.readsNow)
        case .member(let base, _): base.readsNow
        case .call(let receiver, _, let arguments): receiver.readsNow || arguments.contains(where: \.readsNow)
        case .unary(_, let operand): operand.readsNow
        case .binary(_, let left, let right): left.readsNow || right.readsNow
        case .conditional(let condition, let then, let otherwise): condition.readsNow || then.readsNow || otherwise.readsNow
        }
    }

    /// Whether evaluating it may read the data tree (`root` or `data` appears in it).
    public var readsData: Bool {
        switch self {
        case .null, .boolean, .number, .integer, .string: false
        case .variable(let variable): variable == .root || variable == .data
        case .array(let items): items.contains(where: \.readsData)
        case .member(let base, _): base.readsData
        case .call(let receiver, _, let arguments): receiver.readsData || arguments.contains(where: \.readsData)
        case .unary(_, let operand): operand.readsData
        case .binary(_, let left, let right): left.readsData || right.readsData
        case .conditional(let condition, let then, let otherwise): condition.readsData || then.readsData || otherwise.readsData
        }
    }
}

/// The variables of a read rule.
public enum RuleVariable: Sendable, Equatable {
    /// The token's claims: `auth.uid` (the subject) and `auth.token` (every verified claim).
    case auth
    /// Milliseconds since the epoch.
    case now
    /// The snapshot at `/`.
    case root
    /// The snapshot at the node that carries the rule.
    case data
    /// A `$name` captured on the way to the rule: the key it matched.
    case captured(String)
}

/// The methods of snapshots and strings.
public enum RuleMethod: String, Sendable, Equatable, CaseIterable {
    // Snapshots.
    case child, parent, val, exists, hasChild, hasChildren, isString, isNumber, isBoolean
    // Strings.
    case contains, beginsWith, endsWith, replace, toLowerCase, toUpperCase

    /// How many arguments it takes.
    var arity: ClosedRange<Int> {
        switch self {
        case .parent, .val, .exists, .isString, .isNumber, .isBoolean, .toLowerCase, .toUpperCase: 0...0
        case .hasChildren: 0...1
        case .child, .hasChild, .contains, .beginsWith, .endsWith: 1...1
        case .replace: 2...2
        }
    }
}

public enum RuleUnaryOperator: String, Sendable, Equatable {
    case not = "!"
    case negate = "-"
}

public enum RuleBinaryOperator: String, Sendable, Equatable {
    case multiply = "*", divide = "/", remainder = "%"
    case add = "+", subtract = "-"
    case less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    case equal = "==", notEqual = "!="
    case and = "&&", or = "||"
}
