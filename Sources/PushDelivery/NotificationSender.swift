import PushCore
import PushContracts

/// Delivers one notification to one provider and says what the answer means. Never throws:
/// every failure is an outcome.
public protocol NotificationSender: Sendable {
    /// Who it delivers through (the per-provider limits, the metrics' label).
    var provider: Provider { get }
    func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome
    /// Starts the send without a task when it can (a valid access token at hand, a transport
    /// that takes callbacks): `completion` gets the outcome, on any thread, and the call
    /// returns true. False: nothing was started, use ``send(_:now:)``. The default starts
    /// nothing.
    func start(_ notification: StoredNotification, now: Int64, completion: @escaping @Sendable (DeliveryOutcome) -> Void) -> Bool
}

extension NotificationSender {
    public func start(_ notification: StoredNotification, now: Int64, completion: @escaping @Sendable (DeliveryOutcome) -> Void) -> Bool {
        false
    }
}

/// Where each notification goes: the sender of its application and kind (and webhook name).
public protocol SenderDirectory: Sendable {
    func sender(for entry: OutboxEntry) -> (any NotificationSender)?
}
