import PushCore
import PushJSON

/// A record one instance accepted, waiting in the database for the owner of its application
/// (several instances on PostgreSQL).
public struct InboxRecord: Sendable, Equatable {
    /// Given by the store; `0` before.
    public var id: Int64
    public var app: String
    /// The source it came from, named with its instance (`node-1/socket`).
    public var source: String
    /// Where it was in its source (dead-letter entries).
    public var position: Int64
    /// The line as received.
    public var line: [UInt8]
    /// The record's `seq` (when enqueued: the store refuses one its source has accepted
    /// already, through any instance).
    public var seq: Int64?

    public init(id: Int64 = 0, app: String, source: String, position: Int64, line: [UInt8], seq: Int64? = nil) {
        self.id = id
        self.app = app
        self.source = source
        self.position = position
        self.line = line
        self.seq = seq
    }
}
