import PushCore
import PushContracts
import ServiceLifecycle

/// Reads the store every `interval` and tells ``StoreHealth`` how it went: a read that fails,
/// or that is not answered within the health's deadline (a database server that is gone may
/// only make queries wait), makes readiness say the store is unavailable; the next answered
/// read clears it.
public struct StoreProbe: Service {
    let store: any SubscriptionStore
    let health: StoreHealth
    let interval: Duration

    public init(store: any SubscriptionStore, health: StoreHealth, interval: Duration = .seconds(1)) {
        self.store = store
        self.health = health
        self.interval = interval
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            health.probeStarted()
            do {
                // The cheapest read every store has: the last subscription change.
                _ = try await cancelWhenGracefulShutdown { try await store.lastChange() }
                health.probeEnded(failure: nil)
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                health.probeEnded(failure: "\(error)")
            }
            guard await pause(interval, on: health.clock) else { break }
        }
    }
}
