import Logging
import PushCore
import PushDelivery
import ServiceLifecycle

/// Removes expired subscriptions every `interval` (SPEC §5, §11.9): each gets a `revoke` with
/// reason `expired`, queued in the same transaction as its removal (a subscription refreshed
/// meanwhile is kept).
struct ExpirySweeper: Service {
    let store: any IngestStore
    let registry: SubscriptionRegistry
    let sealers: any SealerProvider
    let interval: Duration
    /// Unix seconds now.
    let now: @Sendable () -> Int64
    /// Milliseconds since the epoch now.
    let nowMilliseconds: @Sendable () -> Int64
    /// What the sweeper sleeps on between passes.
    let clock: any Clock<Duration>
    let logger: Logger
    /// Called after revocations were queued (the delivery worker looks for work).
    var didQueue: @Sendable () -> Void = {}
    /// Where `pushdispatch_revocations_total{reason="expired"}` is counted.
    var metrics = LabelledMetrics(factory: nil)

    static let batch = 500

    func run() async throws {
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
                let now = self.now()
                let due = try await store.dueSubscriptions(now: now, limit: Self.batch)
                if due.isEmpty { break }
                var batch = CommitBatch(now: nowMilliseconds())
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
                registry.nudge()
                didQueue()
                logger.info("expired subscriptions removed", metadata: ["count": "\(total)"])
            }
        } catch {
            logger.error("expiry sweep failed", metadata: ["error": "\(error)"])
        }
    }
}

/// Applies this process's own changes to the index as soon as it is nudged.
struct IndexSyncer: Service {
    let registry: SubscriptionRegistry
    let logger: Logger

    func run() async throws {
        for await _ in registry.nudges.cancelOnGracefulShutdown() {
            do {
                try await registry.sync()
            } catch {
                logger.error("index sync failed", metadata: ["error": "\(error)"])
            }
        }
    }
}

/// Applies changes made by others (an operator command, another instance) to the index, and
/// forgets changes every index here has applied.
struct ChangeFollower: Service {
    let store: any SubscriptionStore
    let registry: SubscriptionRegistry
    let interval: Duration
    let logger: Logger

    func run() async throws {
        var rounds = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            guard await pause(interval) else { return }
            do {
                try await registry.sync()
                rounds += 1
                if rounds % 60 == 0 {
                    // Keep the last 10,000 changes for anyone reading the log from the side.
                    try await store.pruneChanges(through: registry.appliedChange - 10_000)
                }
            } catch {
                logger.error("following subscription changes failed", metadata: ["error": "\(error)"])
            }
        }
    }
}

/// Sleeps for `duration` on `clock`; `false` when the service is shutting down or cancelled
/// instead.
func pause(_ duration: Duration, on clock: any Clock<Duration> = ContinuousClock()) async -> Bool {
    do {
        try await cancelWhenGracefulShutdown { try await clock.sleep(for: duration) }
        return true
    } catch {
        return false
    }
}
