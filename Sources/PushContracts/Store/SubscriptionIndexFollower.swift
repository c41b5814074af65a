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
