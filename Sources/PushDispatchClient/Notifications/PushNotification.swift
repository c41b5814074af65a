import PushCore
import PushJSON

/// A notification of the service, read and checked: which node it is about, what happened,
/// whether it carries everything, and what the app should do next.
///
/// ```swift
/// switch notification.event {
/// case .value(let value):        show(value)                 // nil: the node was deleted
/// case .childEvent(let changes): apply(changes)
/// case .noData:                  break                       // a wake-up
/// case .revoked(let reason):     forget(notification.path, reason)
/// }
/// if case .readNode = notification.followUp { reload(notification.path) }
/// ```
public struct PushNotification: Sendable, Equatable {
    /// The application id.
    public let app: String
    /// The subscription's path (canonical): which of the device's subscriptions it is about.
    public let path: String
    /// What happened.
    public let event: NotificationEvent
    /// Whether the event carries everything (``PayloadStatus/ok``), only the changed keys
    /// (``PayloadStatus/onlyKeys``: the push had no room for the values), or nothing of the
    /// data (``PayloadStatus/tooBig``). `ok` for noData and revocations.
    public let status: PayloadStatus
    /// The payload format it came in (webhook bodies count as v2: they carry the v2 event).
    public let format: PayloadFormat
    /// How the notification was protected, so how far it can be trusted.
    public let protection: Protection

    /// How a notification was protected on its way.
    public enum Protection: Sendable, Hashable {
        /// Not at all (v1): anyone able to send through the push provider with the
        /// application's credentials could have written it.
        case none
        /// Signed by the service (a v2 JWS verified with the application's published key, or
        /// its shared HS256 key).
        case signed
        /// Encrypted to this device's own key, and signed by the service inside.
        case endToEnd
        /// Encrypted with a key the application shares with its devices: whoever holds that
        /// key could have written it.
        case sharedKey
        /// A webhook request whose Standard Webhooks signature verified with the webhook's
        /// secret.
        case webhookSignature
    }

    /// What the app should do once it has applied the event.
    public enum FollowUp: Sendable, Hashable {
        /// Nothing: the event carries the whole change.
        case none
        /// Read the node at ``PushNotification/path``: the notification did not carry its
        /// data (a noData wake-up, or a value or child event too big for a push).
        case readNode
        /// Read these children of the node: they were added or changed, and the push had room
        /// for their keys only (``PayloadStatus/onlyKeys``). Removed children are in the event.
        case readChildren([String])
        /// Subscribe again: the subscription expired.
        case subscribeAgain
        /// Nothing more will come from this subscription: the service removed it.
        case subscriptionEnded
    }

    /// A notification from its parts.
    public init(app: String, path: String, event: NotificationEvent, status: PayloadStatus, format: PayloadFormat, protection: Protection) {
        self.app = app
        self.path = path
        self.event = event
        self.status = status
        self.format = format
        self.protection = protection
    }

    /// What to do next, from the event and its status.
    public var followUp: FollowUp {
        switch event {
        case .noData:
            return .readNode
        case .value:
            return status == .ok ? .none : .readNode
        case .childEvent(let changes):
            switch status {
            case .ok: return .none
            case .onlyKeys: return .readChildren((Array(changes.added.keys) + Array(changes.changed.keys)).sorted { Key($0) < Key($1) })
            case .tooBig: return .readNode
            }
        case .revoked(let reason):
            return reason == .expired ? .subscribeAgain : .subscriptionEnded
        }
    }
}

/// What a notification says happened at the subscription's node.
public enum NotificationEvent: Sendable, Equatable {
    /// The node's new value; `nil` when the node was deleted, or when the value was too big
    /// for a push (``PayloadStatus/tooBig``: read the node).
    case value(JSON?)
    /// Something changed at the node (a wake-up without data: read the node).
    case noData
    /// The node's children that were added, changed and removed.
    case childEvent(ChildChanges)
    /// The service ended the subscription.
    case revoked(RevocationReason)
}

/// The children of a node that a write added, changed and removed (SPEC §6).
public struct ChildChanges: Sendable, Equatable {
    /// Children that did not exist: key → new value (`true` under ``PayloadStatus/onlyKeys``).
    public let added: [String: JSON]
    /// Children whose value changed: key → new value (`true` under ``PayloadStatus/onlyKeys``).
    public let changed: [String: JSON]
    /// Keys of the children that were removed, in key order.
    public let removed: [String]

    /// Changes from their parts.
    public init(added: [String: JSON], changed: [String: JSON], removed: [String]) {
        self.added = added
        self.changed = changed
        self.removed = removed
    }
}
