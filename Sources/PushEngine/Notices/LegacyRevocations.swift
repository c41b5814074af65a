import Logging
import PushCore
import PushContracts

/// Revocations a version-1 store queued without a payload.
public enum LegacyRevocations {
    /// Builds them now and queues them as notifications, in one transaction with their removal
    /// from the old table.
    public static func requeue(store: some IngestStore, sealers: any SealerProvider, now: Int64, logger: Logger) async throws {
        var builder = NotificationBuilder(sealers: sealers)
        while true {
            let items = try await store.legacyRevocations(limit: 500)
            if items.isEmpty { return }
            var batch = CommitBatch(now: now)
            for item in items {
                let notice = Notice(
                    subscription: item.subscription,
                    event: Event(app: item.subscription.app, path: item.subscription.path.string, body: .revoke(item.reason)))
                let entry = try? OutboxEntry(notice, payload: builder.payload(notice).bytes, recordSeq: nil)
                batch.operations.append(.revoke(handle: item.subscription.handle ?? 0, notification: entry, condition: .alreadyRemoved))
                batch.legacyProcessed.append(item.sequence)
            }
            _ = try await store.commit(batch)
            logger.info("revocations of an earlier version requeued", metadata: ["count": "\(items.count)"])
        }
    }
}
