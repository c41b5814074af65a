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

    public init(id: Int64 = 0, app: String, source: String, position: Int64, line: [UInt8]) {
        self.id = id
        self.app = app
        self.source = source
        self.position = position
        self.line = line
    }
}

/// An instance as the others see it.
public struct InstanceInfo: Sendable, Equatable {
    public var name: String
    /// Where its HTTP API listens (`host:port`).
    public var address: String
    /// Milliseconds since the epoch, by the database's clock.
    public var startedAt: Int64
    public var heartbeatAt: Int64

    public init(name: String, address: String, startedAt: Int64, heartbeatAt: Int64) {
        self.name = name
        self.address = address
        self.startedAt = startedAt
        self.heartbeatAt = heartbeatAt
    }
}

/// Who owns an application's processing, until when, under which fencing token.
public struct ApplicationLease: Sendable, Equatable {
    public var app: String
    public var owner: String
    /// Grows by one at every change of owner: a commit made under an older token is refused.
    public var token: Int64
    /// Milliseconds since the epoch, by the database's clock.
    public var expiresAt: Int64

    public init(app: String, owner: String, token: Int64, expiresAt: Int64) {
        self.app = app
        self.owner = owner
        self.token = token
        self.expiresAt = expiresAt
    }
}

/// What several instances sharing one database need besides the other stores: the inbox of
/// accepted records, application leases (ownership of processing, fenced), instance
/// heartbeats. Times are the database's, so that instances need not agree on the time.
public protocol ClusterStore: Sendable {
    /// Stores accepted records and the sources' checkpoints in one transaction, and wakes the
    /// owners. Once it returns, the records are durable whatever becomes of this instance.
    func enqueue(_ records: [InboxRecord], checkpoints: [SourceCheckpoint]) async throws

    /// An application's waiting records, oldest first, at most `limit`.
    func inbox(app: String, limit: Int) async throws -> [InboxRecord]

    /// Applications with waiting records.
    func inboxApplications() async throws -> [String]

    /// Records waiting in the inbox.
    func inboxDepth() async throws -> Int

    /// Records this instance's heartbeat; returns the database's time (milliseconds).
    @discardableResult
    func heartbeat(instance: String, address: String) async throws -> Int64

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
}
