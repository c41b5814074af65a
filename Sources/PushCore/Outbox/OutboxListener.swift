/// Told when the outbox changed (notifications queued, claims released): the delivery worker
/// looks for work (and, with several instances, the other instances' workers too).
public protocol OutboxListener: Sendable {
    func outboxChanged()
}

/// The in-memory index of subscriptions follows the store's change log (PushEngine's
/// `SubscriptionRegistry`); whoever changes subscriptions tells it.
public protocol SubscriptionIndexFollower: Sendable {
    /// Subscriptions changed in the store (a revocation, an expiry): catch up soon; returns at
    /// once.
    func nudge()

    /// Catches up now, before answering a client (read-your-writes); on failure, catches up
    /// soon instead.
    func catchUp() async
}

/// Builds the `revoke` (reason `delivery_rejected`) of a subscription a provider refused, in
/// its format, while the subscription still exists; `nil` when it is gone or cannot be built.
public protocol RevocationNotices: Sendable {
    func notice(for entry: OutboxEntry) async -> OutboxEntry?
}
