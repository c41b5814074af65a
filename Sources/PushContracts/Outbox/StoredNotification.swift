import PushCore
import PushJSON

/// A notification as stored, waiting or in flight.
public struct StoredNotification: Sendable, Equatable {
    public var id: Int64
    public var entry: OutboxEntry
    /// Milliseconds since the epoch.
    public var createdAt: Int64
    public var nextAttemptAt: Int64
    public var attempts: Int
    /// When it was first tried (the retry window counts from there); `nil` before.
    public var firstAttemptAt: Int64?
    /// The W3C trace context of the attempt being sent, when tracing is on: a webhook request
    /// carries it. Not stored, and not compared (copies of one notification are equal).
    public var traceparent: String?

    public init(id: Int64, entry: OutboxEntry, createdAt: Int64, nextAttemptAt: Int64, attempts: Int, firstAttemptAt: Int64? = nil) {
        self.id = id
        self.entry = entry
        self.createdAt = createdAt
        self.nextAttemptAt = nextAttemptAt
        self.attempts = attempts
        self.firstAttemptAt = firstAttemptAt
    }

    public static func == (lhs: StoredNotification, rhs: StoredNotification) -> Bool {
        lhs.id == rhs.id && lhs.entry == rhs.entry && lhs.createdAt == rhs.createdAt && lhs.nextAttemptAt == rhs.nextAttemptAt
            && lhs.attempts == rhs.attempts && lhs.firstAttemptAt == rhs.firstAttemptAt
    }
}
