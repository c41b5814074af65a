/// Where a source's reading stands: what a restart resumes from.
public struct SourceCheckpoint: Sendable, Equatable {
    /// The source's name: `queue-file`, `socket` (SPEC §11.3).
    public var source: String
    /// The last accepted `seq` (the watermark); `nil` before the first.
    public var lastSeq: Int64?
    /// Bytes of the source consumed (the queue file's offset after the last line read).
    public var position: Int64
    /// Which file `position` is in (`device:inode` of the queue file).
    public var fileIdentity: String?

    public init(source: String, lastSeq: Int64?, position: Int64 = 0, fileIdentity: String? = nil) {
        self.source = source
        self.lastSeq = lastSeq
        self.position = position
        self.fileIdentity = fileIdentity
    }
}

/// What a notification tells its subscription.
public enum NotificationKind: String, Sendable, CaseIterable {
    case value, noData, childEvent, revoke

    /// A waiting notification of these kinds gives way to a newer one of its subscription, and
    /// to a revocation (SPEC §6, §11.6).
    public var coalesces: Bool { self == .value || self == .noData }

    public init(_ event: Event) {
        switch event.body {
        case .noData: self = .noData
        case .value: self = .value
        case .childEvent: self = .childEvent
        case .revoke: self = .revoke
        }
    }
}

/// A notification to deliver: everything a sender needs.
public struct OutboxEntry: Sendable, Equatable {
    public var app: String
    public var subscriptionHandle: Int64
    public var subscriptionID: String
    public var kind: SubscriptionKind
    /// The device token (`mobile`, `huawei`) or the webhook's context.
    public var target: String?
    /// The webhook's name (`webhook` only).
    public var destination: String?
    public var notification: NotificationKind
    /// The data payload (v1/v2) or the webhook body without its `id`.
    public var payload: [UInt8]
    /// The record that led to it (`nil` for expiry).
    public var recordSeq: Int64?

    public init(
        app: String, subscriptionHandle: Int64, subscriptionID: String, kind: SubscriptionKind, target: String?, destination: String?,
        notification: NotificationKind, payload: [UInt8], recordSeq: Int64?
    ) {
        self.app = app
        self.subscriptionHandle = subscriptionHandle
        self.subscriptionID = subscriptionID
        self.kind = kind
        self.target = target
        self.destination = destination
        self.notification = notification
        self.payload = payload
        self.recordSeq = recordSeq
    }

    /// The entry of a notice built into `payload`.
    public init(_ notice: Notice, payload: [UInt8], recordSeq: Int64?) {
        let subscription = notice.subscription
        self.init(
            app: subscription.app, subscriptionHandle: subscription.handle ?? 0, subscriptionID: subscription.id, kind: subscription.kind,
            target: subscription.tuple.context, destination: subscription.tuple.destination, notification: NotificationKind(notice.event),
            payload: payload, recordSeq: recordSeq)
    }
}

/// One step of a commit, in delivery order.
public enum OutboxOperation: Sendable, Equatable {
    /// Queue a notification, if its subscription still exists. A `value` or `noData` one
    /// replaces the waiting (not in flight) `value`/`noData` notifications of its subscription.
    case notify(OutboxEntry)
    /// Delete a subscription and queue its revoke notification (when given): only if the
    /// subscription exists and meets `condition`. Its waiting `value`/`noData` notifications are
    /// dropped; waiting `childEvent` ones stay, ahead of the revocation.
    case revoke(handle: Int64, notification: OutboxEntry?, condition: RevokeCondition)
}

/// When a revocation applies.
public enum RevokeCondition: Sendable, Equatable {
    /// Whenever the subscription exists.
    case exists
    /// Only if it exists and its expiration is at or before this time (Unix seconds): a
    /// subscription refreshed meanwhile is kept.
    case expiredBy(Int64)
    /// The subscription is gone already: queue the notification regardless.
    case alreadyRemoved
}

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
    /// Several instances (PostgreSQL): the inbox rows the batch processed, deleted with it.
    public var consumedInbox: [Int64] = []
    /// Several instances: the application leases the batch was processed under (application →
    /// fencing token) and their holder. The commit fails with `.leaseLost`, writing nothing,
    /// unless the holder still holds every one of them.
    public var leases: [String: Int64] = [:]
    public var leaseHolder: String?

    public init(now: Int64) {
        self.now = now
    }

    public var isEmpty: Bool {
        operations.isEmpty && journal.isEmpty && checkpoints.isEmpty && legacyProcessed.isEmpty && consumedInbox.isEmpty
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

    public init(id: Int64, entry: OutboxEntry, createdAt: Int64, nextAttemptAt: Int64, attempts: Int, firstAttemptAt: Int64? = nil) {
        self.id = id
        self.entry = entry
        self.createdAt = createdAt
        self.nextAttemptAt = nextAttemptAt
        self.attempts = attempts
        self.firstAttemptAt = firstAttemptAt
    }
}

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
