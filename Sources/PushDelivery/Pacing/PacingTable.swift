import PushContracts
import PushCore

/// The send-rate budgets (issue 34): per kind of sender for every application, per application,
/// and per webhook destination; a sender without one is not paced.
public struct PacingTable: Sendable, Equatable {
    /// Sends per second for every application's sender of a kind (a Web Push budget applies to
    /// each push service's origin).
    public var byKind: [SubscriptionKind: Double]
    /// One application's budgets, over `byKind`.
    public var byApp: [String: [SubscriptionKind: Double]]
    /// One webhook destination's budget (application → webhook name → budget), over the rest.
    public var byWebhook: [String: [String: Double]]
    /// A quota answer's `Retry-After` is honoured within these bounds (milliseconds).
    public var retryAfterMinimum: Int64
    public var retryAfterMaximum: Int64
    /// Instances sharing each budget (their store's live instances): each paces at its share.
    public var instances: Int

    /// FCM's default quota: 600,000 messages a minute per project (docs/providers-2026.md).
    public static let fcmDefault = 600_000.0 / 60

    public init(
        byKind: [SubscriptionKind: Double] = [:], byApp: [String: [SubscriptionKind: Double]] = [:], byWebhook: [String: [String: Double]] = [:],
        retryAfterMinimum: Int64 = 1_000, retryAfterMaximum: Int64 = 60_000, instances: Int = 1
    ) {
        self.byKind = byKind
        self.byApp = byApp
        self.byWebhook = byWebhook
        self.retryAfterMinimum = retryAfterMinimum
        self.retryAfterMaximum = retryAfterMaximum
        self.instances = max(1, instances)
    }

    /// No budgets: nothing is paced.
    public static let none = PacingTable()

    /// The budget of `key`'s sender, this instance's share of it; `nil`: not paced.
    public func policy(for key: SenderKey) -> PacingPolicy? {
        let budget: Double? =
            if key.kind == .webhook, let destination = key.destination, let own = byWebhook[key.app]?[destination] {
                own
            } else {
                byApp[key.app]?[key.kind] ?? byKind[key.kind]
            }
        guard let budget, budget > 0 else { return nil }
        return PacingPolicy(
            perSecond: budget / Double(instances), retryAfterMinimum: retryAfterMinimum, retryAfterMaximum: retryAfterMaximum)
    }
}
