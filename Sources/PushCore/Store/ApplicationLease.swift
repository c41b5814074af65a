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

/// What a batch processed by an application's owner commits under: the lease it holds and the
/// inbox rows it consumed. The commit writes nothing, and fails with ``StoreError/Kind/leaseLost``,
/// unless `holder` still holds `app` under `token`; the consumed rows are deleted with the batch.
public struct LeaseFence: Sendable, Equatable {
    public var app: String
    public var token: Int64
    public var holder: String
    /// The inbox rows the batch processed.
    public var consumed: [Int64]

    public init(app: String, token: Int64, holder: String, consumed: [Int64]) {
        self.app = app
        self.token = token
        self.holder = holder
        self.consumed = consumed
    }
}

/// What wakes whom among instances sharing one database (LISTEN/NOTIFY on PostgreSQL).
public enum ClusterSignal: String, Sendable, CaseIterable {
    /// A subscription changed: the index follows the change log now.
    case subscriptions
    /// Records were accepted into the inbox: owners take them now.
    case inbox
    /// Notifications were queued or claims released: delivery workers look for work now.
    case outbox
}
