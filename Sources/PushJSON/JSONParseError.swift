/// Why a document is not valid JSON, and where.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset (from 0) in the input where the problem was found.
    public let offset: Int
    /// What was wrong, and what was expected there.
    public let reason: String

    public init(offset: Int, reason: String) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String {
        "invalid JSON at byte \(offset): \(reason)"
    }
}
