import PushCore
import PushJSON

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
        let rule = Self.shortened(rule)
        if let column { return "\(rule), column \(column): \(message)" }
        return "\(rule): \(message)"
    }

    /// A location of at most ~200 bytes: its start and its end around `…` when longer (keys
    /// are up to 768 bytes and rules nest 64 deep, and a message never echoes a huge input).
    static func shortened(_ location: String) -> String {
        let bytes = Array(location.utf8)
        guard bytes.count > 2 * JSONWriter.excerptBytes else { return location }
        let head = JSONWriter.utf8Prefix(bytes, maxBytes: JSONWriter.excerptBytes)
        var tail = bytes.suffix(JSONWriter.excerptBytes)[...]
        while let first = tail.first, first & 0xC0 == 0x80 { tail = tail.dropFirst() }
        return String(decoding: head, as: UTF8.self) + "…(\(bytes.count) bytes)…" + String(decoding: tail, as: UTF8.self)
    }
}
