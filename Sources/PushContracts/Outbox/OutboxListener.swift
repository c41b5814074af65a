import PushCore
import PushJSON

/// Told when the outbox changed (notifications queued, claims released): the delivery worker
/// looks for work (and, with several instances, the other instances' workers too).
public protocol OutboxListener: Sendable {
    func outboxChanged()
}
