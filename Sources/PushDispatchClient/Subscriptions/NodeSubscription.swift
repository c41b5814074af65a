import Foundation
import PushCore
import PushJSON

/// One subscription as the service keeps it: its id, node, target and lifetime. It can be
/// refreshed (its expiration pushed forward) and cancelled.
public struct NodeSubscription: Sendable, Equatable, CustomStringConvertible {
    /// The id the service derived from the subscription's app, uid, kind, destination, path
    /// and context: the same subscription always has the same id.
    public let id: String
    /// The node's path (canonical).
    public let path: String
    /// Where its notifications go.
    public let target: SubscriptionTarget
    /// What the device is told of a change.
    public let mode: Mode
    /// The payload format (webhooks receive the v2 event whatever it says).
    public let format: PayloadFormat
    /// When the service created it.
    public let createdAt: Date
    /// When it ends unless refreshed.
    public let expiresAt: Date
    /// The `encryption` block as the service keeps it (moved as it is to a new device token).
    let encryption: JSON?
    let client: SubscriptionClient

    /// Pushes the expiration forward: to `expiration` (capped by the service to the
    /// application's maximum lifetime), or by the application's default lifetime when `nil`.
    /// Returns the subscription as the service now keeps it.
    @discardableResult
    public func refresh(until expiration: Date? = nil) async throws(PushClientError) -> NodeSubscription {
        var until: Int64?
        if let expiration { until = try SubscriptionDescriptor.seconds(expiration) }
        return try await client.refresh(id: id, until: until)
    }

    /// Removes it from the service: no notification follows. A subscription the service no
    /// longer has is ``PushClientError/Code/notFound``.
    public func cancel() async throws(PushClientError) {
        try await client.delete(id: id)
    }

    /// Equal when every field the service returned is equal.
    public static func == (lhs: NodeSubscription, rhs: NodeSubscription) -> Bool {
        lhs.id == rhs.id && lhs.path == rhs.path && lhs.target == rhs.target && lhs.mode == rhs.mode && lhs.format == rhs.format
            && lhs.createdAt == rhs.createdAt && lhs.expiresAt == rhs.expiresAt && lhs.encryption == rhs.encryption
    }

    /// The id, path, target and expiration.
    public var description: String {
        "subscription \(id) on \(path) (\(mode.rawValue), \(target)) until \(expiresAt)"
    }
}

/// Where a subscription's notifications go.
public enum SubscriptionTarget: Sendable, Hashable, CustomStringConvertible {
    /// A device, through its push provider.
    case device(DeviceToken)
    /// A webhook of the application, by name, with the context passed to it.
    case webhook(name: String, context: String?)
    /// A kind this version of the library does not know, as the service wrote it.
    case other(kind: String, context: String?)

    /// The device, webhook or kind, briefly (never a whole device token).
    public var description: String {
        switch self {
        case .device(let token): return token.description
        case .webhook(let name, _): return "webhook \(Bounded.quoted(name))"
        case .other(let kind, _): return "kind \(Bounded.quoted(kind))"
        }
    }
}
