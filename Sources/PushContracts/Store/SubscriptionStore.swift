import PushCore
import PushJSON
import PushMatching

/// The outcome of saving a subscription whose tuple may already exist.
public enum SaveOutcome: Sendable, Equatable {
    /// A new subscription.
    case created(Subscription)
    /// The tuple existed and was refreshed (mode, format, encryption, expiration and claims
    /// replaced).
    case refreshed(Subscription)
    /// The tuple existed and refreshing was not allowed: the existing subscription.
    case conflict(Subscription)
    /// A new subscription, refused: its user has `count` already, the most allowed.
    case tooMany(count: Int)
}

/// A committed change to the subscriptions, in commit order: what keeps every in-memory index
/// in step with the store, whoever made the change (this process, an operator command, or
/// another instance).
public struct SubscriptionChange: Sendable, Equatable {
    public enum Operation: String, Sendable {
        case insert, update, delete
    }

    /// Increasing with commit order.
    public let sequence: Int64
    public let operation: Operation
    public let handle: Int64
    public let app: String
    public let path: Path
    public let mode: Mode

    public init(sequence: Int64, operation: Operation, handle: Int64, app: String, path: Path, mode: Mode) {
        self.sequence = sequence
        self.operation = operation
        self.handle = handle
        self.app = app
        self.path = path
        self.mode = mode
    }
}

/// What the matching index needs of one subscription.
public struct IndexRecord: Sendable, Equatable {
    public let handle: Int64
    public let app: String
    public let path: Path
    public let mode: Mode

    public init(handle: Int64, app: String, path: Path, mode: Mode) {
        self.handle = handle
        self.app = app
        self.path = path
        self.mode = mode
    }
}

/// A revocation waiting for delivery as version 1 stores kept it (before notifications carried
/// their payloads): the subscription as it was, and what to tell it.
public struct OutboxItem: Sendable, Equatable {
    public let sequence: Int64
    public let subscription: Subscription
    public let reason: RevokeReason
    /// Unix seconds.
    public let createdAt: Int64

    public init(sequence: Int64, subscription: Subscription, reason: RevokeReason, createdAt: Int64) {
        self.sequence = sequence
        self.subscription = subscription
        self.reason = reason
        self.createdAt = createdAt
    }
}

/// Persistent subscriptions. Every implementation passes the same contract tests
/// (`Tests/PushStoreTests`); SQLite is the embedded one.
public protocol SubscriptionStore: Sendable {
    /// Stores a subscription. When its tuple exists: refreshes it if `allowUpdate`, else
    /// reports the conflict. Atomic: of concurrent saves of one tuple, one creates.
    func save(_ subscription: Subscription, allowUpdate: Bool) async throws -> SaveOutcome

    /// ``save(_:allowUpdate:)``, refusing a new subscription (``SaveOutcome/tooMany(count:)``)
    /// when its user has `maxPerUser` in its application already; counted in the same
    /// transaction as the insert, so that concurrent creates cannot pass the limit together.
    func save(_ subscription: Subscription, allowUpdate: Bool, maxPerUser: Int?) async throws -> SaveOutcome

    func subscription(app: String, uid: String, id: String) async throws -> Subscription?

    /// The subscriptions of one user of one application, by id.
    func subscriptions(app: String, uid: String) async throws -> [Subscription]

    /// Subscriptions in handle order after `handle`, at most `limit` (operators' listings).
    func subscriptions(app: String?, after handle: Int64, limit: Int) async throws -> [Subscription]

    func subscription(id: String) async throws -> Subscription?

    /// Subscriptions by handle (those that still exist).
    func subscriptions(handles: [Int64]) async throws -> [Int64: Subscription]

    /// Removes a subscription; returns it, or `nil` when there was none.
    func remove(app: String, uid: String, id: String) async throws -> Subscription?

    /// Sets a subscription's expiration and the claims it was refreshed with; returns it
    /// updated, or `nil` when there was none.
    func updateExpiration(app: String, uid: String, id: String, expiresAt: Int64, auth: JSON?) async throws -> Subscription?

    /// Index records in handle order after `handle`, at most `limit`: to load the index.
    func indexRecords(after handle: Int64, limit: Int) async throws -> [IndexRecord]

    /// Committed changes after `sequence`, in commit order, at most `limit`. Throws
    /// ``StoreError`` `.changeLogPruned` when changes after `sequence` were already pruned: a
    /// reader that far behind has missed changes and must reload from the table.
    func changes(after sequence: Int64, limit: Int) async throws -> [SubscriptionChange]

    /// The sequence of the last committed change (0 when none).
    func lastChange() async throws -> Int64

    /// Forgets changes up to and including `sequence`, and remembers that it did (so that a
    /// reader behind it learns of the gap rather than skipping changes).
    func pruneChanges(through sequence: Int64) async throws

    /// Number of subscriptions per kind.
    func countByKind() async throws -> [SubscriptionKind: Int]
}
