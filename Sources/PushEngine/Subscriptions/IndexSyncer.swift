import Logging
import ServiceLifecycle

/// Applies this process's own changes to the index as soon as it is nudged.
public struct IndexSyncer: Service {
    let registry: SubscriptionRegistry
    let logger: Logger

    public init(registry: SubscriptionRegistry, logger: Logger) {
        self.registry = registry
        self.logger = logger
    }

    public func run() async throws {
        for await _ in registry.nudges.cancelOnGracefulShutdown() {
            do {
                try await registry.sync()
            } catch {
                logger.error("index sync failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
