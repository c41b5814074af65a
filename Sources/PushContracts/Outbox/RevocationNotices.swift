import PushCore
import PushJSON

/// Builds the `revoke` (reason `delivery_rejected`) of a subscription a provider refused, in
/// its format, while the subscription still exists; `nil` when it is gone or cannot be built.
public protocol RevocationNotices: Sendable {
    func notice(for entry: OutboxEntry) async -> OutboxEntry?
}
