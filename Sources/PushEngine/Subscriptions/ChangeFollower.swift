import Logging
import PushCore
import PushContracts
import ServiceLifecycle

/// Applies changes made by others (an operator command, another instance) to the index every
/// `interval`, and forgets changes every index here has applied.
public struct ChangeFollower: Service {
    let store: any SubscriptionStore
    let registry: SubscriptionRegistry
    let interval: Duration
    let clock: any ServiceClock
    let logger: Logger

    public init(store: any SubscriptionStore, registry: SubscriptionRegistry, interval: Duration, clock: any ServiceClock, logger: Logger) {
        self.store = store
        self.registry = registry
        self.interval = interval
        self.clock = clock
        self.logger = logger
    }

    public func run() async throws {
        var rounds = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            guard await pause(interval, on: clock) else { return }
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
