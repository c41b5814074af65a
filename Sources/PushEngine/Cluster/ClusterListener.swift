import Logging
import PushContracts
import PushCore
import PushMatching
import ServiceLifecycle

/// Wakes this instance's parts as soon as another instance (or this one) has something for
/// them: the index follower (a subscription changed), the owner (records in the inbox), the
/// delivery worker (notifications queued), the dispatcher (an operator resumed a sender on
/// another instance). They also poll, so a signal lost in a reconnection
/// only delays.
public struct ClusterListener: Service {
    let store: any ClusterStore
    let index: any SubscriptionIndexFollower
    let owner: Wakeup
    let outbox: any OutboxListener
    /// An operator resumed a sender on some instance: resume it here too.
    let resume: @Sendable (SenderKey) -> Void

    public init(
        store: any ClusterStore, index: any SubscriptionIndexFollower, owner: Wakeup, outbox: any OutboxListener,
        resume: @escaping @Sendable (SenderKey) -> Void = { _ in }
    ) {
        self.store = store
        self.resume = resume
        self.index = index
        self.owner = owner
        self.outbox = outbox
    }

    public func run() async throws {
        let (index, owner, outbox, resume) = (self.index, self.owner, self.outbox, self.resume)
        await cancelWhenGracefulShutdown {
            await store.listen(
                { signal in
                    switch signal {
                    case .subscriptions: index.nudge()
                    case .inbox: owner.signal()
                    case .outbox: outbox.outboxChanged()
                    }
                }, resumed: resume)
        }
    }
}
