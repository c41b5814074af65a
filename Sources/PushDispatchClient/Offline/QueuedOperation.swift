/// A subscription operation accepted by the offline queue: the handle an app keeps to see what
/// became of it.
///
/// ```swift
/// let operation = try await room.offline.subscribeThroughNotifications(descriptor: .init(mode: .value))
/// switch await operation.outcome() {          // waits until the service answered, for good
/// case .confirmed(let subscription?): print("subscribed until", subscription.expiresAt)
/// case .refused(let error):            print("refused:", error)   // permission_denied, …
/// case .cancelled:                     break                      // withdrawn before it was sent
/// default:                             break
/// }
/// ```
///
/// States: ``State/pending(attempts:lastError:)`` while it waits for the network, the service
/// or new credentials; then one of ``State/confirmed(_:)``, ``State/refused(_:)`` or
/// ``State/cancelled``, for good. An operation merged into a later one (a second subscribe of
/// the same node, say) ends as that one does.
public struct QueuedOperation: Sendable, Hashable, CustomStringConvertible {
    /// What an operation asks of the service.
    public enum Kind: String, Sendable, CaseIterable {
        /// Subscribe a device or webhook to a node (or refresh that subscription: same tuple).
        case subscribe
        /// Remove the subscription of a device or webhook to a node.
        case unsubscribe
        /// Push a subscription's expiration forward.
        case refresh
        /// Remove one subscription, by id.
        case cancel
        /// Remove every subscription of a device.
        case unsubscribeAll
        /// Move every subscription of a device token to a new one.
        case updateDeviceToken
    }

    /// Where an operation is.
    public enum State: Sendable, Equatable, CustomStringConvertible {
        /// Waiting: for the network (retried with back-off), for the service, or for new
        /// credentials (``OfflineQueue/Status/suspended``). `attempts` is how many times it was
        /// sent; `lastError` what the last attempt met.
        case pending(attempts: Int, lastError: PushClientError?)
        /// The service did it: the subscription as it now keeps it (subscribe, refresh), or
        /// `nil` (the removals, a token update).
        case confirmed(NodeSubscription?)
        /// The service refused it, and it will not be sent again: its error
        /// (`permission_denied`, `too_many_subscriptions`, `not_found` for a refresh of a
        /// subscription the service no longer has, `partial_update` naming the nodes a token
        /// update could not move…), or `user_changed` when the credentials are now for another
        /// user.
        case refused(PushClientError)
        /// Withdrawn: before it was sent, by ``QueuedOperation/cancel()`` or made pointless by a
        /// later operation (an unsubscribe of the same node, an unsubscribe of all); or
        /// forgotten by ``OfflineQueue/discardAll()``, whatever its attempts.
        case cancelled

        /// Whether the state is final.
        public var isFinal: Bool {
            if case .pending = self { return false }
            return true
        }

        /// `pending (2 attempts: transport: …)`, `confirmed`, `refused (permission_denied: …)`,
        /// `cancelled`.
        public var description: String {
            switch self {
            case .pending(let attempts, let error):
                return "pending (\(attempts) attempt\(attempts == 1 ? "" : "s")\(error.map { ": \($0)" } ?? ""))"
            case .confirmed(let subscription): return subscription.map { "confirmed (\($0))" } ?? "confirmed"
            case .refused(let error): return "refused (\(error))"
            case .cancelled: return "cancelled"
            }
        }
    }

    /// A change of an operation's state, as ``OfflineQueue/updates()`` reports it.
    public struct Update: Sendable, CustomStringConvertible {
        /// The operation.
        public let operation: QueuedOperation
        /// Its new state.
        public let state: State

        /// The operation and its state.
        public var description: String { "\(operation): \(state)" }
    }

    /// The queue's id of the operation (not a subscription id), kept across restarts.
    public let id: String
    /// What it asks.
    public let kind: Kind
    /// The node it is about (subscribe, unsubscribe, refresh, cancel).
    public let path: String?
    let queue: OperationQueueActor

    init(_ operation: PendingOperation, queue: OperationQueueActor) {
        id = operation.id
        kind = operation.kind
        path = operation.path
        self.queue = queue
    }

    /// Its state now.
    public func state() async -> State {
        await queue.state(of: id)
    }

    /// Its final state: waits until the service confirmed or refused it, or it was cancelled.
    /// Returns at once when it already was. Returns the state it is left in (pending) when its
    /// ``PushDispatch`` ended, and `pending` for an operation this process does not know (queued
    /// by an earlier launch and ended in another, or one of more than the last 4,096 to end).
    public func outcome() async -> State {
        await queue.outcome(of: id)
    }

    /// Withdraws it if it was never sent: it ends ``State/cancelled`` and the service hears
    /// nothing of it (a subscribe then a cancel sends nothing). Returns `false`, changing
    /// nothing, when it was sent at least once (the service may have applied it: unsubscribe
    /// instead), is final already, or is a token update (the device token changed when it was
    /// queued).
    @discardableResult
    public func cancel() async -> Bool {
        await queue.withdraw(id)
    }

    /// Same id.
    public static func == (lhs: QueuedOperation, rhs: QueuedOperation) -> Bool {
        lhs.id == rhs.id
    }

    /// Hashes the id.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
    }

    /// The kind, the node and the id.
    public var description: String {
        "\(kind.rawValue)\(path.map { " \(Bounded.quoted($0))" } ?? "") [\(id)]"
    }
}
