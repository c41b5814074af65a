import Foundation
import PushCore
import PushJSON

/// Subscription operations that wait for the service: accepted at once, whatever the network,
/// sent in order when the service can be reached, kept across restarts when persistence is
/// enabled (``OfflineQueueConfiguration``). The offline half of the library, as Firebase's
/// Realtime Database client queues writes made offline.
///
/// ```swift
/// let push = try PushDispatch(.init(baseURL: url, app: "toto", credentials: credentials,
///     deviceToken: try .fcm(token), offlineQueue: .persistent()))
/// let operation = try await push.node(for: "/rooms/lobby").offline
///     .subscribeThroughNotifications(descriptor: .init(mode: .value))   // returns at once
/// for await update in push.offline.updates() { print(update) }         // pending → confirmed
/// ```
///
/// - Order: operations are sent one at a time, in the order they were queued.
/// - Merging: operations that cancel or repeat each other are merged before anything is sent
///   (a subscribe then ``QueuedOperation/cancel()`` sends nothing; two token updates send one),
///   never so that the service ends up holding something else than sending each in order
///   would leave. The rules are those of `OperationMerging`, listed in the README.
/// - Lifetime: the queue lives as long as its ``PushDispatch``; when that ends, no attempt
///   starts, and the file (which keeps what waits) is free for a new one.
/// - Failures: no answer, any 5xx or 408, or a failing credentials provider: the operation waits, and is sent
///   again after a back-off with jitter (1 s doubling to 5 min by default), or at once after
///   ``networkAvailable()``. A 401 that a fresh token did not cure suspends the queue until
///   ``credentialsChanged()``. Any other refusal (`permission_denied`, …) refuses that
///   operation alone, and the next goes on.
/// - Resending is safe: the service names a subscription by its tuple (application, user,
///   kind, destination, node, context), so a subscribe sent twice (its first answer lost) is
///   one subscription, refreshed; a removal of what is gone is what was asked.
public struct OfflineQueue: Sendable {
    let actor: OperationQueueActor
    let service: PushDispatch

    /// What the queue is doing.
    public struct Status: Sendable, CustomStringConvertible {
        /// Operations waiting, the one being sent included.
        public let pending: Int
        /// Whether an operation is on the network now.
        public let sending: Bool
        /// Set while the queue waits for new credentials (after a 401): the error that
        /// suspended it. ``OfflineQueue/credentialsChanged()`` resumes it.
        public let suspended: PushClientError?
        /// What the last attempt met, when it failed.
        public let lastError: PushClientError?
        /// When the next attempt is due, while the queue waits after a failure.
        public let nextAttempt: Date?
        /// Set when the queue's file could not be read: nothing is sent or queued until
        /// ``OfflineQueue/discardAll()``.
        public let storeError: PushClientError?

        /// A line for a log.
        public var description: String {
            var parts = ["\(pending) pending"]
            if sending { parts.append("sending") }
            if let suspended { parts.append("suspended (\(suspended))") }
            if let nextAttempt { parts.append("next attempt at \(nextAttempt)") }
            if let lastError, suspended == nil { parts.append("last error: \(lastError)") }
            if let storeError { parts.append("store: \(storeError)") }
            return parts.joined(separator: ", ")
        }
    }

    /// Removes every subscription of this device (its current token), as
    /// ``PushDispatch/unsubscribeFromAllThroughNotifications()`` does, when the service can be
    /// reached. Waiting subscribes of this device are withdrawn.
    public func unsubscribeFromAllThroughNotifications() async throws(PushClientError) -> QueuedOperation {
        try await actor.enqueueForDevice { .unsubscribeAll(device: $0) }
    }

    /// Moves every subscription of `oldToken` (by default, the current device token) to
    /// `newToken`, as ``PushDispatch/updateDeviceTokenInAllSubscriptions(_:replacing:)`` does,
    /// when the service can be reached. `newToken` becomes the device token at once: what is
    /// subscribed after this goes to it. Operations of the old token queued before it are sent
    /// before it, and it moves what they made; two updates waiting, with only other devices'
    /// operations between them, are sent as one from both earlier tokens. The same token again
    /// moves nothing: the handle is confirmed at once.
    public func updateDeviceTokenInAllSubscriptions(_ newToken: DeviceToken, replacing oldToken: DeviceToken? = nil)
        async throws(PushClientError) -> QueuedOperation
    {
        try await actor.enqueueTokenUpdate(newToken, replacing: oldToken)
    }

    /// Pushes `subscription`'s expiration forward (see ``NodeSubscription/refresh(until:)``)
    /// when the service can be reached.
    public func refresh(_ subscription: NodeSubscription, until expiration: Date? = nil) async throws(PushClientError) -> QueuedOperation {
        var until: Int64?
        if let expiration { until = try SubscriptionDescriptor.seconds(expiration) }
        return try await actor.enqueue(.refresh(id: subscription.id, path: subscription.path, until: until))
    }

    /// Removes `subscription` (see ``NodeSubscription/cancel()``) when the service can be
    /// reached; one the service no longer has counts as removed.
    public func cancel(_ subscription: NodeSubscription) async throws(PushClientError) -> QueuedOperation {
        try await actor.enqueue(.cancel(id: subscription.id, path: subscription.path))
    }

    /// The operations waiting, in the order they will be sent: after a restart, those the app
    /// queued before it.
    public func operations() async throws(PushClientError) -> [QueuedOperation] {
        try await actor.pending()
    }

    /// Every change of an operation's state from now on: queued, attempted and failed, then
    /// confirmed, refused or cancelled. Each call returns a stream of its own (it keeps the
    /// last 1,024 updates not yet read).
    public func updates() async -> AsyncStream<QueuedOperation.Update> {
        await actor.updates()
    }

    /// What the queue is doing.
    public func status() async -> Status {
        await actor.status()
    }

    /// Call when the network is back (from an `NWPathMonitor` handler on Apple platforms, or
    /// whatever tells the app): the next attempt is made now, not after its back-off. The
    /// library cannot watch the network itself on every platform.
    public func networkAvailable() async {
        await actor.networkAvailable()
    }

    /// Call when the app's credentials changed (a user signed in again, a token was renewed): a
    /// queue suspended by a 401 asks the credentials provider again and resumes.
    public func credentialsChanged() async {
        await actor.credentialsChanged()
    }

    /// Forgets every waiting operation (they end cancelled, including one that was attempted
    /// and may have been applied: the app asked to forget), and a queue file that could not be
    /// read. The one on the network, if any, stays: it settles, or waits and is sent again. For
    /// sign-out: operations are sent for the user the credentials name, and one queued for
    /// another ends `user_changed`. Throws `queue_store` when another ``PushDispatch`` holds the
    /// file.
    public func discardAll() async throws(PushClientError) {
        try await actor.discardAll()
    }
}

extension PushDispatch {
    /// The offline queue: subscription operations accepted whatever the network, sent when the
    /// service can be reached (see ``OfflineQueue``).
    public var offline: OfflineQueue {
        OfflineQueue(actor: queue, service: self)
    }
}

/// A node's subscription operations through the offline queue.
public struct OfflineNode: Sendable {
    /// The node.
    public let node: DataNode

    /// Queues the subscription of this device to the node, as
    /// ``DataNode/subscribeThroughNotifications(descriptor:)`` makes it: the device token, and
    /// the device's public key for end-to-end encryption, are taken now. Returns at once.
    public func subscribeThroughNotifications(descriptor: SubscriptionDescriptor = SubscriptionDescriptor()) async throws(PushClientError)
        -> QueuedOperation
    {
        let service = node.service
        // Checked first so that no device key is made for a device without a token.
        _ = try await service.requireDeviceToken()
        let options = try await service.options(descriptor)
        let path = node.path
        return try await service.queue.enqueueForDevice { token in
            .subscribe(target: .device(token), path: path, options: options, allowsUpdate: descriptor.allowsUpdate)
        }
    }

    /// Queues the removal of this device's subscription to the node.
    public func unsubscribeThroughNotifications() async throws(PushClientError) -> QueuedOperation {
        let path = node.path
        return try await node.service.queue.enqueueForDevice { .unsubscribe(target: .device($0), path: path) }
    }

    /// Queues the subscription of the application's webhook `webhook`, with `context`.
    public func subscribeThroughWebhook(_ webhook: String, context: String, descriptor: SubscriptionDescriptor = SubscriptionDescriptor())
        async throws(PushClientError) -> QueuedOperation
    {
        let service = node.service
        _ = try SubscriptionDocument.webhook(webhook, context: context, path: node.path)
        var members: [(Key, JSON)] = [(Key("mode"), .string(descriptor.mode.rawValue))]
        if let seconds = try descriptor.expirationSeconds() { members.append((Key("expirationTimestampSeconds"), .int(seconds))) }
        return try await service.queue.enqueue(
            .subscribe(
                target: .webhook(name: webhook, context: context), path: node.path, options: JSONObject(members),
                allowsUpdate: descriptor.allowsUpdate))
    }

    /// Queues the removal of the subscription of the webhook `webhook` with `context`.
    public func unsubscribeThroughWebhook(_ webhook: String, context: String) async throws(PushClientError) -> QueuedOperation {
        let service = node.service
        _ = try SubscriptionDocument.webhook(webhook, context: context, path: node.path)
        return try await service.queue.enqueue(.unsubscribe(target: .webhook(name: webhook, context: context), path: node.path))
    }
}

extension DataNode {
    /// This node's subscription operations through the offline queue (``OfflineQueue``):
    /// accepted at once, sent when the service can be reached.
    public var offline: OfflineNode {
        OfflineNode(node: self)
    }
}
