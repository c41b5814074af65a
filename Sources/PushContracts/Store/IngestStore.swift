import PushCore
import PushJSON

/// The durable side of ingestion: checkpoints, tree journals and snapshots, the outbox. Shaped
/// for PostgreSQL as well as SQLite: one batch operation for what commits together, nothing
/// engine-specific, identities never reused.
public protocol IngestStore: Sendable {
    /// Commits a batch atomically.
    func commit(_ batch: CommitBatch) async throws -> CommitResult

    /// Every source's checkpoint.
    func checkpoints() async throws -> [SourceCheckpoint]

    /// The applications that have a stored tree (snapshot or journal).
    func treeApplications() async throws -> [String]

    /// An application's stored tree.
    func tree(app: String) async throws -> StoredTree

    /// Stores a snapshot of an application's tree that covers its journal rows up to `through`,
    /// and forgets those rows. Written in chunks: a large tree never holds the store in one
    /// long transaction, and a crash midway leaves the previous snapshot in place.
    func saveSnapshot(app: String, tree: [UInt8], through: Int64) async throws

    /// Subscriptions whose expiration is at or before `now` (Unix seconds), at most `limit`.
    func dueSubscriptions(now: Int64, limit: Int) async throws -> [Subscription]

    /// Waiting revocations stored before notifications carried payloads (version 1 stores).
    func legacyRevocations(limit: Int) async throws -> [OutboxItem]

    /// Notifications queued, oldest first, at most `limit` (operators, tests).
    func notifications(limit: Int) async throws -> [StoredNotification]

    /// Number of notifications queued, and the creation time of the oldest (milliseconds).
    func outboxDepth() async throws -> (count: Int, oldest: Int64?)
}
