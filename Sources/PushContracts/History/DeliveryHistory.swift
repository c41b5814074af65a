import PushCore

/// One delivery attempt as the history keeps it (SPEC §13.2): what was sent to whom because of
/// which record, what came back, and what the dispatcher decided.
public struct DeliveryAttempt: Sendable, Equatable {
    /// What the attempt came to.
    public enum Outcome: String, Sendable, CaseIterable {
        case delivered, retry, revoked, dropped, discarded, paused
    }

    /// The notification's id in the outbox.
    public var notification: Int64
    /// The subscription's id (not its handle: it stays readable after a revocation).
    public var subscription: String
    public var app: String
    /// The record that caused the notification (`nil` for expiry revocations).
    public var seq: Int64?
    /// `fcm`, `hms`, `apns`, `webpush`, `webhook`, or `none` when no sender is configured.
    public var provider: String
    /// The webhook's name or the push service's origin (`nil` for FCM, HMS and APNs).
    public var destination: String?
    /// 1 for the first attempt.
    public var attempt: Int
    /// When the answer was settled (milliseconds since the epoch).
    public var at: Int64
    /// The HTTP status of the answer; `nil` when none came.
    public var status: Int?
    /// The provider's error code and message, or the transport's error; `nil` when delivered.
    public var reason: String?
    /// From the send's start to its answer (milliseconds); `nil` when nothing was sent.
    public var latencyMs: Int64?
    public var outcome: Outcome
    /// For `retry`: when it is tried again.
    public var nextAt: Int64?

    public init(
        notification: Int64, subscription: String, app: String, seq: Int64?, provider: String, destination: String?, attempt: Int, at: Int64,
        status: Int?, reason: String?, latencyMs: Int64?, outcome: Outcome, nextAt: Int64?
    ) {
        self.notification = notification
        self.subscription = subscription
        self.app = app
        self.seq = seq
        self.provider = provider
        self.destination = destination
        self.attempt = attempt
        self.at = at
        self.status = status
        self.reason = reason
        self.latencyMs = latencyMs
        self.outcome = outcome
        self.nextAt = nextAt
    }
}

/// A subscription a record concerned that got nothing from it, and why (SPEC §13.2).
public struct RecordSkip: Sendable, Equatable {
    public enum Why: String, Sendable, CaseIterable {
        /// Coalesced into a later notification of the same subscription (`value`/`noData`).
        case coalesced
        /// The read rules denied it (it is revoked with `permission_denied`).
        case denied
        /// Its payload exceeded what the provider takes (revoked with `too_big`).
        case tooBig = "too_big"
        /// It expired before the notification went out.
        case expired
        /// It was revoked or deleted before the notification went out.
        case revoked

        /// Why a subscription revoked with `reason` got nothing.
        public init(revocation reason: RevokeReason?) {
            switch reason {
            case .permissionDenied: self = .denied
            case .tooBig: self = .tooBig
            case .expired: self = .expired
            default: self = .revoked
            }
        }
    }

    public var app: String
    public var seq: Int64
    public var subscription: String
    public var why: Why
    /// When it was decided (milliseconds since the epoch).
    public var at: Int64

    public init(app: String, seq: Int64, subscription: String, why: Why, at: Int64) {
        self.app = app
        self.seq = seq
        self.subscription = subscription
        self.why = why
        self.at = at
    }
}

/// How much history is kept (`operations.history`). Either bound at 0 turns it off.
public struct HistoryLimits: Sendable, Equatable {
    /// Milliseconds.
    public var maxAge: Int64
    public var maxRows: Int

    public init(maxAge: Int64 = 7 * 86_400_000, maxRows: Int = 1_000_000) {
        self.maxAge = max(0, maxAge)
        self.maxRows = max(0, maxRows)
    }

    public static let off = HistoryLimits(maxAge: 0, maxRows: 0)

    public var isOn: Bool { maxAge > 0 && maxRows > 0 }
}

/// A page of a list: the items and where the next page starts (`nil` on the last).
public struct HistoryPage<Item: Sendable>: Sendable {
    public var items: [Item]
    public var nextCursor: Int64?

    public init(items: [Item], nextCursor: Int64?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

/// A notification a record caused, with its attempts; `waiting` while it is still in the
/// outbox, `discarded` when it was discarded after the retry window.
public struct RecordNotification: Sendable, Equatable {
    public enum State: String, Sendable {
        case waiting, settled, discarded
    }

    public var notification: Int64
    public var subscription: String
    /// `value`, `noData`, `childEvent` or `revoke`, while the outbox still holds it (waiting or
    /// discarded); `nil` once settled.
    public var kind: String?
    public var state: State
    /// Newest first.
    public var attempts: [DeliveryAttempt]

    public init(notification: Int64, subscription: String, kind: String?, state: State, attempts: [DeliveryAttempt]) {
        self.notification = notification
        self.subscription = subscription
        self.kind = kind
        self.state = state
        self.attempts = attempts
    }
}

/// What a record caused: its notifications and the subscriptions that got nothing.
public struct RecordFate: Sendable, Equatable {
    public var notifications: [RecordNotification]
    public var nothing: [RecordSkip]

    public init(notifications: [RecordNotification], nothing: [RecordSkip]) {
        self.notifications = notifications
        self.nothing = nothing
    }
}

/// A subscription found by an operator's search, with its last attempt.
public struct SubscriptionFound: Sendable, Equatable {
    public var subscription: Subscription
    public var lastAttempt: DeliveryAttempt?

    public init(subscription: Subscription, lastAttempt: DeliveryAttempt?) {
        self.subscription = subscription
        self.lastAttempt = lastAttempt
    }
}

/// What an operator searches subscriptions by (all given ones must match; `token` is the
/// whole device token or webhook context, matched exactly).
public struct SubscriptionQuery: Sendable, Equatable {
    public var app: String?
    public var uid: String?
    public var path: String?
    public var token: String?

    public init(app: String? = nil, uid: String? = nil, path: String? = nil, token: String? = nil) {
        self.app = app
        self.uid = uid
        self.path = path
        self.token = token
    }
}

/// Which discarded notifications to queue again (`POST /ops/v1/recover`).
public struct RecoveryFilter: Sendable, Equatable {
    public var app: String
    /// A subscription kind's provider (`fcm`, `webhook`, …), or all.
    public var kind: SubscriptionKind?
    /// A webhook's name, or all.
    public var destination: String?
    /// Discarded at or after this time (milliseconds since the epoch).
    public var since: Int64

    public init(app: String, kind: SubscriptionKind? = nil, destination: String? = nil, since: Int64) {
        self.app = app
        self.kind = kind
        self.destination = destination
        self.since = since
    }
}

/// The delivery history (SPEC §13.2): written with the outbox (attempts with their settlement,
/// skips with their batch), read by the operations API.
public protocol HistoryStore: Sendable {
    /// A subscription's attempts, newest first, from `cursor` (exclusive) on.
    func attempts(app: String, subscription: String, cursor: Int64?, limit: Int) async throws -> HistoryPage<DeliveryAttempt>
    /// What record `seq` of `app` caused.
    func fate(app: String, seq: Int64) async throws -> RecordFate
    /// Subscriptions matching `query`, by handle from `cursor` (exclusive) on, each with its
    /// last attempt.
    func subscriptions(matching query: SubscriptionQuery, cursor: Int64?, limit: Int) async throws -> HistoryPage<SubscriptionFound>
    /// Queues again, oldest first, the notifications discarded since `filter.since` whose
    /// subscription still exists (due at `now`, their attempts counted afresh): how many.
    func recover(_ filter: RecoveryFilter, now: Int64) async throws -> Int
    /// Removes what is older than `limits.maxAge` at `now` or beyond `limits.maxRows`
    /// (everything when off): how many rows.
    @discardableResult
    func pruneHistory(now: Int64, limits: HistoryLimits) async throws -> Int
}
