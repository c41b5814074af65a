import PushCore
import PushJSON

/// An application's tree as stored: the last snapshot and the journal written after it.
public struct StoredTree: Sendable {
    /// The compact JSON of the tree at the snapshot; `nil` when there is none.
    public var snapshot: [UInt8]?
    /// The journal rows the snapshot covers (ids at or below).
    public var snapshotThrough: Int64
    /// Journal rows after the snapshot, in order: (id, NDJSON lines).
    public var journal: [(id: Int64, lines: [UInt8])]

    public init(snapshot: [UInt8]?, snapshotThrough: Int64, journal: [(id: Int64, lines: [UInt8])]) {
        self.snapshot = snapshot
        self.snapshotThrough = snapshotThrough
        self.journal = journal
    }
}
