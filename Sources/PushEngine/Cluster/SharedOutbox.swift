import Logging
import PushCore
import PushContracts
import ServiceLifecycle

/// The outbox changed here: the local delivery worker looks for work at once, and the other
/// instances' workers are signalled (one signal for a burst of commits).
public final class SharedOutbox: OutboxListener, Service, Sendable {
    let store: any ClusterStore
    let local: any OutboxListener
    let pending: AsyncStream<Void>
    let continuation: AsyncStream<Void>.Continuation

    public init(store: any ClusterStore, local: any OutboxListener) {
        self.store = store
        self.local = local
        (pending, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    public func outboxChanged() {
        local.outboxChanged()
        continuation.yield()
    }

    public func run() async throws {
        for await _ in pending.cancelOnGracefulShutdown() {
            await store.signal(.outbox)
        }
    }
}
