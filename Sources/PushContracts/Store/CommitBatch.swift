import PushCore
import PushJSON

/// What commits together: a batch of records' effects. Nothing of it is visible until all of it
/// is (one transaction), so a crash neither loses nor duplicates any part.
public struct CommitBatch: Sendable {
    /// Notifications and revocations, in delivery order.
    public var operations: [OutboxOperation] = []
    /// Accepted records that changed each application's tree, as NDJSON lines, in order.
    public var journal: [String: [UInt8]] = [:]
    /// Where each source stands after the batch.
    public var checkpoints: [SourceCheckpoint] = []
    /// Legacy waiting revocations (by sequence) re-queued by this batch.
    public var legacyProcessed: [Int64] = []
    /// Milliseconds since the epoch: the notifications' creation and first due time.
    public var now: Int64
    /// Whether the delivery history is kept (SPEC §13.2): the store then notes the skips it
    /// decides itself (a notification coalesced into a later one across batches, dropped by a
    /// revocation, or for a subscription gone), beside ``skips``.
    public var keepsHistory = false
    /// Subscriptions the batch's records concerned that get nothing from them (the engine's
    /// part: denied by the rules, too big, revoked by the record, coalesced within the batch).
    public var skips: [RecordSkip] = []

    public init(now: Int64) {
        self.now = now
    }

    public var isEmpty: Bool {
        operations.isEmpty && journal.isEmpty && checkpoints.isEmpty && legacyProcessed.isEmpty
    }
}

/// What a commit did.
public struct CommitResult: Sendable, Equatable {
    /// The subscriptions actually deleted.
    public var revoked: [Int64] = []
    /// Notifications queued.
    public var queued = 0
    /// Waiting notifications dropped because a newer one (or a revocation) replaced them.
    public var coalesced = 0
    /// The journal row each application's lines went to.
    public var journalIDs: [String: Int64] = [:]

    public init() {}
}
