import Logging
import PushContracts
import PushCore
import ServiceLifecycle

/// Keeps the delivery history within `operations.history` (SPEC §13.2): at start, then every
/// minute, what is older than `maxAge` or beyond `maxRows` goes, oldest first, a chunk per
/// transaction. With the history off, what an earlier run kept is removed once, at start.
struct HistoryPruner: Service {
    let store: any HistoryStore
    let limits: HistoryLimits
    let clock: any ServiceClock
    let interval: Duration
    let logger: Logger

    init(store: any HistoryStore, limits: HistoryLimits, clock: any ServiceClock, interval: Duration = .seconds(60), logger: Logger) {
        self.store = store
        self.limits = limits
        self.clock = clock
        self.interval = interval
        self.logger = logger
    }

    func run() async throws {
        await prune()
        // Off: what an earlier run kept is gone; nothing more to do until the stop (a service
        // that returns ends the group).
        guard limits.isOn else {
            try? await gracefulShutdown()
            return
        }
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do { try await clock.sleep(for: interval) } catch { return }
                await prune()
            }
        }
    }

    func prune() async {
        do {
            let removed = try await store.pruneHistory(now: clock.now, limits: limits)
            if removed > 0 { logger.info("delivery history pruned", metadata: ["rows": "\(removed)"]) }
        } catch {
            if Task.isCancelled { return }
            logger.warning("the delivery history cannot be pruned; trying again later", metadata: ["error": "\(error)"])
        }
    }
}
