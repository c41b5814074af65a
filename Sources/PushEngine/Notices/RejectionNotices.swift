import Logging
import PushCore
import PushContracts

/// Builds the `revoke` (reason `delivery_rejected`) of a subscription a provider refused, in
/// its format, while it still exists (SPEC §8): the delivery worker queues it with the
/// subscription's removal.
public struct RejectionNotices: RevocationNotices {
    let store: any SubscriptionStore
    let sealers: any SealerProvider
    let logger: Logger

    public init(store: any SubscriptionStore, sealers: any SealerProvider, logger: Logger) {
        self.store = store
        self.sealers = sealers
        self.logger = logger
    }

    public func notice(for entry: OutboxEntry) async -> OutboxEntry? {
        do {
            guard let subscription = try await store.subscriptions(handles: [entry.subscriptionHandle])[entry.subscriptionHandle] else {
                return nil
            }
            var builder = NotificationBuilder(sealers: sealers)
            let notice = Notice(
                subscription: subscription, event: Event(app: subscription.app, path: subscription.path.string, body: .revoke(.deliveryRejected)))
            return OutboxEntry(notice, payload: try builder.payload(notice).bytes, recordSeq: nil)
        } catch {
            logger.error(
                "the revoke of a refused subscription cannot be built; it is removed without one",
                metadata: ["subscription": "\(entry.subscriptionID)", "error": "\(error)"])
            return nil
        }
    }
}
