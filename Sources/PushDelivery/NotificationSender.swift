import PushCore

/// Delivers one notification to one provider and says what the answer means. Never throws:
/// every failure is an outcome.
public protocol NotificationSender: Sendable {
    /// The `provider` label of the metrics: `fcm`, `hms`, `webhook`.
    var provider: String { get }
    func send(_ notification: StoredNotification, now: Int64) async -> DeliveryOutcome
}

/// Where each notification goes: the sender of its application and kind (and webhook name).
public protocol SenderDirectory: Sendable {
    func sender(for entry: OutboxEntry) -> (any NotificationSender)?
}
