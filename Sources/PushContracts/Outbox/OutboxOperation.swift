import PushCore
import PushJSON

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
