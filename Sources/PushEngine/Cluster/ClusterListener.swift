import Logging
import PushCore
import ServiceLifecycle

/// Wakes this instance's parts as soon as another instance (or this one) has something for
/// them: the index follower (a subscription changed), the owner (records in the inbox), the
/// delivery worker (notifications queued). They also poll, so a signal lost in a reconnection
/// only delays.
public struct ClusterListener: Service {
    let store: any ClusterStore
    let index: any SubscriptionIndexFollower
    let owner: Wakeup
    let outbox: any OutboxListener

    public init(store: any ClusterStore, index: any SubscriptionIndexFollower, owner: Wakeup, outbox: any OutboxListener) {
        self.store = store
        self.index = index
        self.owner = owner
        self.outbox = outbox
    }

    public func run() async throws {
        let (index, owner, outbox) = (self.index, self.owner, self.outbox)
        await cancelWhenGracefulShutdown {
            await store.listen { signal in
                switch signal {
                case .subscriptions: index.nudge()
                case .inbox: owner.signal()
                case .outbox: outbox.outboxChanged()
                }
            }
        }
    }
}

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
