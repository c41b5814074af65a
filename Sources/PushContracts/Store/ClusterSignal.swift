import PushCore
import PushJSON

/// What wakes whom among instances sharing one database (LISTEN/NOTIFY on PostgreSQL).
public enum ClusterSignal: String, Sendable, CaseIterable {
    /// A subscription changed: the index follows the change log now.
    case subscriptions
    /// Records were accepted into the inbox: owners take them now.
    case inbox
    /// Notifications were queued or claims released: delivery workers look for work now.
    case outbox
}
