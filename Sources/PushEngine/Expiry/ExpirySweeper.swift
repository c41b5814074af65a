import Logging
import PushContracts
import PushCore
import PushMatching
import ServiceLifecycle

/// Removes expired subscriptions every `interval` (SPEC §5, §11.9): each gets a `revoke` with
/// reason `expired`, queued in the same transaction as its removal (a subscription refreshed
/// meanwhile is kept).
public struct ExpirySweeper: Service {
    let store: any IngestStore
    let index: any SubscriptionIndexFollower
    let outbox: any OutboxListener
    let sealers: any SealerProvider
    let interval: Duration
    let clock: any ServiceClock
    /// Where `pushdispatch_revocations_total{reason="expired"}` is counted.
    let metrics: any MetricsRecorder
    let logger: Logger

    static let batch = 500

    public init(
        store: any IngestStore, index: any SubscriptionIndexFollower, outbox: any OutboxListener, sealers: any SealerProvider, interval: Duration,
        clock: any ServiceClock, metrics: any MetricsRecorder = NoMetrics(), logger: Logger
    ) {
        self.store = store
        self.index = index
        self.outbox = outbox
        self.sealers = sealers
        self.interval = interval
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            await sweep()
            guard await pause(interval, on: clock) else { return }
        }
    }

    /// One pass: removes everything due, in batches.
    func sweep() async {
        var builder = NotificationBuilder(sealers: sealers)
        do {
            var total = 0
            while true {
                let now = clock.nowSeconds
                let due = try await store.dueSubscriptions(now: now, limit: Self.batch)
                if due.isEmpty { break }
                var batch = CommitBatch(now: clock.now)
                for subscription in due {
                    let notice = Notice(subscription: subscription, event: Event(app: subscription.app, path: subscription.path.string, body: .revoke(.expired)))
                    var entry: OutboxEntry?
                    do {
                        entry = OutboxEntry(notice, payload: try builder.payload(notice).bytes, recordSeq: nil)
                    } catch {
                        logger.error(
                            "an expired subscription's revoke cannot be built; it is removed without one",
                            metadata: ["subscription": "\(subscription.id)", "error": "\(error)"])
                    }
                    batch.operations.append(.revoke(handle: subscription.handle ?? 0, notification: entry, condition: .expiredBy(now)))
                }
                let result = try await store.commit(batch)
                total += result.revoked.count
                metrics.increment("pushdispatch_revocations_total", [("reason", RevokeReason.expired.rawValue)], by: result.revoked.count)
                if due.count < Self.batch || result.revoked.isEmpty { break }
            }
            if total > 0 {
                index.nudge()
                outbox.outboxChanged()
                logger.info("expired subscriptions removed", metadata: ["count": "\(total)"])
            }
        } catch {
            logger.error("expiry sweep failed", metadata: ["error": "\(error)"])
        }
    }
}
