/// A rules file that cannot be used (SPEC §12): which rule, where in it, and what is wrong.
public struct RulesError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The rule's location in the rules file, as keys from `rules` down (`rules/rooms/$room/.read`).
    public let rule: String
    /// The 1-based column in the rule's expression text, when the fault is in an expression.
    public let column: Int?
    /// What is wrong, and what was expected.
    public let message: String

    public init(rule: String, column: Int? = nil, _ message: String) {
        self.rule = rule
        self.column = column
        self.message = message
    }

    public var description: String {
        if let column { return "\(rule), column \(column): \(message)" }
        return "\(rule): \(message)"
    }
}
