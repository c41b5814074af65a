import PushCore
import PushJSON

/// What several instances sharing one database need besides the other stores: the inbox of
/// accepted records, application leases (ownership of processing, fenced), instance
/// heartbeats. Times are the database's, so that instances need not agree on the time.
public protocol ClusterStore: IngestStore {
    /// Commits a batch an owner processed under `fence` (see ``LeaseFence``), atomically.
    func commit(_ batch: CommitBatch, fence: LeaseFence) async throws -> CommitResult

    /// Stores accepted records and the sources' checkpoints in one transaction, and wakes the
    /// owners. Once it returns, the records are durable whatever becomes of this instance.
    ///
    /// A source's `seq` is the database stream's, shared by every instance (a client that lost
    /// its instance sends what was not acknowledged to another): under the lock of the
    /// sources' checkpoint rows, a record whose `seq` is at or below its source's stored
    /// watermark is not stored (another instance accepted it) and is listed in the result,
    /// and a watermark never moves back.
    func enqueue(_ records: [InboxRecord], checkpoints: [SourceCheckpoint]) async throws -> EnqueueResult

    /// An application's waiting records, oldest first, at most `limit`.
    func inbox(app: String, limit: Int) async throws -> [InboxRecord]

    /// Applications with waiting records.
    func inboxApplications() async throws -> [String]

    /// Records waiting in the inbox.
    func inboxDepth() async throws -> Int

    /// Records that this instance starts (its heartbeat, its address).
    func registerStart(instance: String, address: String) async throws

    /// The instance row of `name`, if there is one: its heartbeat, whether it is retiring, and
    /// the database's time now (milliseconds).
    func instanceState(named name: String) async throws -> (heartbeatAt: Int64, retiring: Bool, address: String, now: Int64)?

    /// Records this instance's heartbeat, and its report when one is given (``InstanceReport``:
    /// what the operations overview shows of it; at most ``InstanceReport/maximumBytes``);
    /// returns the database's time (milliseconds).
    @discardableResult
    func heartbeat(instance: String, address: String, report: [UInt8]?) async throws -> Int64

    /// The last report of each instance whose heartbeat is at most `within` milliseconds old,
    /// retiring ones left out, by name.
    func instanceReports(within: Int64) async throws -> [String: [UInt8]]

    /// Instances whose heartbeat is at most `within` milliseconds old, retiring ones left out.
    func instances(within: Int64) async throws -> [InstanceInfo]

    /// Marks an instance as stopping: it no longer counts in the shares (its heartbeat still
    /// keeps its delivery claims).
    func retire(instance: String) async throws

    /// Removes a stopped instance.
    func forget(instance: String) async throws

    /// Extends the leases `holder` still holds by `ttl` milliseconds; returns them (app → token).
    func renewLeases(holder: String, ttl: Int64) async throws -> [String: Int64]

    /// Takes `app` for `holder` for `ttl` milliseconds if nobody holds it (no lease, or an
    /// expired one), with a new token; returns the token, or `nil` when another holds it.
    func acquireLease(app: String, holder: String, ttl: Int64) async throws -> Int64?

    /// Gives up `app` (it expires now) if `holder` holds it.
    func releaseLease(app: String, holder: String) async throws

    /// Every lease, live or expired.
    func leases() async throws -> [ApplicationLease]

    /// Gives up the delivery claims of instances whose heartbeat is older than `staleAfter`
    /// milliseconds (they died holding them); returns how many.
    func releaseClaimsOfStaleInstances(staleAfter: Int64) async throws -> Int

    /// Wakes the instances waiting for `signal` (this one included). Fire and forget: the
    /// waiters also poll, so a lost signal only delays.
    func signal(_ signal: ClusterSignal) async

    /// Tells every instance (this one included) that an operator resumed `sender`: they resume
    /// it too. Fire and forget: an instance that misses it resumes at its next probe.
    func announce(resumed sender: SenderKey) async

    /// Calls `wake` with every signal any instance sends, and `resumed` with every sender an
    /// operator resumed, until the task is cancelled (reconnecting after a lost connection).
    func listen(_ wake: @escaping @Sendable (ClusterSignal) -> Void, resumed: @escaping @Sendable (SenderKey) -> Void) async
}

extension ClusterStore {
    /// The heartbeat alone: the report kept is the last one written.
    @discardableResult
    public func heartbeat(instance: String, address: String) async throws -> Int64 {
        try await heartbeat(instance: instance, address: address, report: nil)
    }

    public func listen(_ wake: @escaping @Sendable (ClusterSignal) -> Void) async {
        await listen(wake, resumed: { _ in })
    }
}

/// What an instance publishes of itself with its heartbeat for the others' operations
/// overview (SPEC §13.3: on PostgreSQL every instance answers for all of them): a JSON object
/// (`senders`, `sending`, `paused`, `credentials`), the same as the overview's own parts.
public enum InstanceReport {
    /// The longest report written (a larger one is cut to its sending figures).
    public static let maximumBytes = 256 * 1_024
}

/// A record a source had accepted already: its index in the records given, and the source's
/// watermark then.
public typealias AcceptedAlready = (index: Int, watermark: Int64)

/// What ``ClusterStore/enqueue(_:checkpoints:)`` did besides storing.
public struct EnqueueResult: Sendable {
    /// Indexes (in the records given) of records not stored: their source had accepted that
    /// `seq` already, with the watermark it had then.
    public var duplicates: [AcceptedAlready] = []
    /// Each source's watermark after the commit.
    public var watermarks: [String: Int64] = [:]

    public init(duplicates: [AcceptedAlready] = [], watermarks: [String: Int64] = [:]) {
        self.duplicates = duplicates
        self.watermarks = watermarks
    }
}
