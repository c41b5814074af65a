import PushCore
import PushJSON

/// What became of a claimed notification: the dispatcher settles its claims in batches.
public enum Settlement: Sendable, Equatable {
    /// Delivered: the notification is done.
    case delivered(id: Int64)
    /// Try again at `nextAttemptAt`. A `value`/`noData` notification for which a newer one now
    /// waits gives way to it (the newer one inherits the schedule: a subscription that backs
    /// off keeps doing so).
    case retry(id: Int64, nextAttemptAt: Int64, firstAttemptAt: Int64, attempts: Int)
    /// Back to waiting as it was, no attempt counted (a paused application, a shutdown).
    case release(id: Int64)
    /// Back to waiting, due at `until` at the earliest, no attempt counted: claimed while its
    /// sender was paused or slowed down (a claim that raced the decision, an entry whose
    /// destination the claim could not see).
    case postpone(id: Int64, until: Int64)
    /// Dropped alone, the subscription kept (a payload the provider refused as malformed).
    case drop(id: Int64)
    /// The retry window has passed: this and every other notification waiting for the
    /// subscription are discarded; the subscription stays.
    case discard(id: Int64, subscriptionHandle: Int64)
    /// The provider refused the subscription for good: delete it and what waits for it, then
    /// queue `notification` (its revoke notification), if any.
    case revoke(id: Int64, subscriptionHandle: Int64, notification: OutboxEntry?)

    public var id: Int64 {
        switch self {
        case .delivered(let id), .retry(let id, _, _, _), .release(let id), .postpone(let id, _), .drop(let id), .discard(let id, _), .revoke(let id, _, _): id
        }
    }
}

/// One application's sender for one kind of subscription, and for the kinds whose answers come
/// from somewhere the operator does not control, one destination: a webhook (its owner
/// answers) or a push service's origin (the subscriber chose it). What pauses, slow-downs and
/// the bounds on sends at once apply to: broken FCM credentials stop the application's FCM
/// sends, not its webhooks; a webhook or a push service that refuses, asks to slow down or
/// answers slowly holds up only the sends to it (issue 33).
public struct SenderKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var app: String
    public var kind: SubscriptionKind
    /// The webhook's name, the push service's origin (`https://host[:port]`); `nil` for the
    /// providers the operator configured (FCM, HMS, APNs).
    public var destination: String?

    public init(app: String, kind: SubscriptionKind, destination: String? = nil) {
        self.app = app
        self.kind = kind
        self.destination = kind == .webhook || kind == .webpush ? destination : nil
    }

    /// The sender an entry's sends go through: a Web Push entry's origin is read from its
    /// context (the outbox stores a destination for webhooks only, so a claim cannot leave a
    /// push service out: what is claimed for a held one is postponed, see
    /// `DispatchStateMachine`).
    public init(_ entry: OutboxEntry) {
        let destination: String? =
            switch entry.kind {
            case .webhook: entry.destination
            case .webpush: entry.target.flatMap(WebPushContext.origin(context:))
            default: nil
            }
        self.init(app: entry.app, kind: entry.kind, destination: destination)
    }

    /// Whether it is a destination (a webhook, a push service), not an operator's provider.
    public var isDestination: Bool { destination != nil }

    public static func < (lhs: SenderKey, rhs: SenderKey) -> Bool {
        (lhs.app, lhs.kind.rawValue, lhs.destination ?? "") < (rhs.app, rhs.kind.rawValue, rhs.destination ?? "")
    }

    public var description: String { "\(app)/\(kind.rawValue)" + (destination.map { "/\($0)" } ?? "") }
}

/// What a settlement did.
public struct SettleResult: Sendable, Equatable {
    /// Notifications discarded (the settled ones and the others of their subscriptions).
    public var discarded = 0
    /// Of those, by the id of the settled notification: how many went with it (itself included).
    public var discardedWith: [Int64: Int] = [:]
    /// Subscriptions deleted.
    public var revoked: [Int64] = []
    /// Retried notifications that gave way to a newer one.
    public var superseded = 0
    /// Settlements ignored because the claim was no longer this claimant's (it expired and
    /// another took the notification, or it was deleted meanwhile).
    public var lost = 0

    public init() {}
}

/// The delivery side of the outbox. Shaped for several instances sharing one database: a
/// claim is held by a named claimant until a lease time, settling checks the claim is still
/// held, and only the oldest notification of a subscription is ever claimed (order per
/// subscription across instances).
public protocol DeliveryStore: Sendable {
    /// Claims up to `limit` notifications that are due at `now`: for each subscription only its
    /// oldest one, and only when nobody holds a live claim on it. Senders in `excluding`
    /// (paused, slowed down) are skipped; of each sender in `capped` (paced) at most its
    /// number are taken. Ordered by due time.
    func claim(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>, capped: [SenderKey: Int]) async throws
        -> [StoredNotification]

    /// Applies settlements of notifications this claimant holds, in one transaction, with
    /// `attempts` into the delivery history (SPEC §13.2). `now` (milliseconds) dates the revoke
    /// notifications queued. With attempts given, the history is on: a discarded notification
    /// is kept for recovery and one that gives way to a newer one is noted `coalesced`.
    func settle(_ settlements: [Settlement], attempts: [DeliveryAttempt], claimant: String, now: Int64) async throws -> SettleResult

    /// The earliest due time of a notification `claim` could take (an unclaimed oldest one of
    /// its subscription), senders in `excluding` left out; `nil` when none waits.
    func nextDue(excluding: Set<SenderKey>) async throws -> Int64?

    /// Gives up claims: of one claimant, or every claim when `claimant` is `nil` (a single
    /// instance starting after a crash).
    @discardableResult
    func releaseClaims(claimant: String?) async throws -> Int

    /// Gives up this claimant's claims but those in `keeping` (the ones it knows it holds): after
    /// a claim whose answer was lost (the connection cut after the commit), the notifications it
    /// took would otherwise wait for their lease. How many were released.
    @discardableResult
    func releaseClaims(claimant: String, keeping: Set<Int64>) async throws -> Int

    /// Deletes the notifications of `sender` created before `createdBefore` that nobody holds a
    /// live claim on at `now` (a paused sender's, past the retry window): how many. `keeping`:
    /// they are kept for recovery (the history is on).
    func discardWaiting(for sender: SenderKey, createdBefore: Int64, now: Int64, keeping: Bool) async throws -> Int
    /// ``claim(now:limit:claimant:leaseUntil:excluding:capped:)``, then, when fewer than `limit`
    /// were due, ``nextDue(excluding:)`` (leaving out too the capped senders whose number was
    /// taken: their budget, not the outbox, says when more go): one round trip where the store
    /// can (SQLite: one transaction), two otherwise (the default).
    func claimDue(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>, capped: [SenderKey: Int]) async throws
        -> ClaimedBatch
    /// ``settle(_:attempts:claimant:now:)`` (dated `settledAt`), then
    /// ``claimDue(now:limit:claimant:leaseUntil:excluding:capped:)``: one round trip where the
    /// store can (SQLite: one transaction, undone as a whole if any part fails), two otherwise.
    /// Throws when the settlements were not stored; the claim's own failure is in its result.
    func settleAndClaimDue(
        _ settlements: [Settlement], attempts: [DeliveryAttempt], settledAt: Int64, claimant: String, now: Int64, limit: Int, leaseUntil: Int64,
        excluding: Set<SenderKey>, capped: [SenderKey: Int]
    ) async throws -> (SettleResult, Result<ClaimedBatch, any Error>)
}


/// What ``DeliveryStore/claimDue(now:limit:claimant:leaseUntil:excluding:)`` took, and when to
/// look again.
public struct ClaimedBatch: Sendable, Equatable {
    /// The next due time after a claim that took fewer than its limit.
    public enum NextDue: Sendable, Equatable {
        /// The claim took its limit: more may be due now.
        case notRead
        /// Nothing else waits.
        case none
        case at(Int64)
        /// The read failed (what was claimed stands): look again soon.
        case unknown(String)
    }

    public var notifications: [StoredNotification]
    public var nextDue: NextDue

    /// The senders a claim that took `claimed` leaves out of its next due time: `excluding`, and
    /// the capped ones whose number it took.
    public static func nextDueExclusion(_ excluding: Set<SenderKey>, capped: [SenderKey: Int], claimed: [StoredNotification]) -> Set<SenderKey> {
        guard !capped.isEmpty else { return excluding }
        var taken: [SenderKey: Int] = [:]
        for notification in claimed {
            let key = SenderKey(notification.entry)
            if capped[key] != nil { taken[key, default: 0] += 1 }
        }
        return excluding.union(capped.filter { taken[$0.key, default: 0] >= $0.value }.keys)
    }

    public init(notifications: [StoredNotification], nextDue: NextDue) {
        self.notifications = notifications
        self.nextDue = nextDue
    }
}

extension DeliveryStore {
    /// Settles without history.
    public func settle(_ settlements: [Settlement], claimant: String, now: Int64) async throws -> SettleResult {
        try await settle(settlements, attempts: [], claimant: claimant, now: now)
    }

    /// Discards without keeping.
    public func discardWaiting(for sender: SenderKey, createdBefore: Int64, now: Int64) async throws -> Int {
        try await discardWaiting(for: sender, createdBefore: createdBefore, now: now, keeping: false)
    }

    /// Settles without history, then claims.
    public func settleAndClaimDue(
        _ settlements: [Settlement], settledAt: Int64, claimant: String, now: Int64, limit: Int, leaseUntil: Int64, excluding: Set<SenderKey>
    ) async throws -> (SettleResult, Result<ClaimedBatch, any Error>) {
        try await settleAndClaimDue(
            settlements, attempts: [], settledAt: settledAt, claimant: claimant, now: now, limit: limit, leaseUntil: leaseUntil, excluding: excluding,
            capped: [:])
    }

    /// Settles, then claims with no sender capped.
    public func settleAndClaimDue(
        _ settlements: [Settlement], attempts: [DeliveryAttempt], settledAt: Int64, claimant: String, now: Int64, limit: Int, leaseUntil: Int64,
        excluding: Set<SenderKey>
    ) async throws -> (SettleResult, Result<ClaimedBatch, any Error>) {
        try await settleAndClaimDue(
            settlements, attempts: attempts, settledAt: settledAt, claimant: claimant, now: now, limit: limit, leaseUntil: leaseUntil, excluding: excluding,
            capped: [:])
    }

    public func settleAndClaimDue(
        _ settlements: [Settlement], attempts: [DeliveryAttempt], settledAt: Int64, claimant: String, now: Int64, limit: Int, leaseUntil: Int64,
        excluding: Set<SenderKey>, capped: [SenderKey: Int]
    ) async throws -> (SettleResult, Result<ClaimedBatch, any Error>) {
        let result = try await settle(settlements, attempts: attempts, claimant: claimant, now: settledAt)
        do {
            return (
                result,
                .success(try await claimDue(now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding, capped: capped))
            )
        } catch {
            return (result, .failure(error))
        }
    }

    /// Claims with no sender capped.
    public func claim(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>) async throws -> [StoredNotification] {
        try await claim(now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding, capped: [:])
    }

    /// Claims with no sender capped, and the next due time.
    public func claimDue(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>) async throws -> ClaimedBatch {
        try await claimDue(now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding, capped: [:])
    }

    public func claimDue(now: Int64, limit: Int, claimant: String, leaseUntil: Int64, excluding: Set<SenderKey>, capped: [SenderKey: Int]) async throws
        -> ClaimedBatch
    {
        let claimed = try await claim(now: now, limit: limit, claimant: claimant, leaseUntil: leaseUntil, excluding: excluding, capped: capped)
        guard claimed.count < limit else { return ClaimedBatch(notifications: claimed, nextDue: .notRead) }
        do {
            let exclusion = ClaimedBatch.nextDueExclusion(excluding, capped: capped, claimed: claimed)
            return ClaimedBatch(notifications: claimed, nextDue: try await nextDue(excluding: exclusion).map { .at($0) } ?? ClaimedBatch.NextDue.none)
        } catch {
            return ClaimedBatch(notifications: claimed, nextDue: .unknown(String(describing: error)))
        }
    }
}
