import PushCore
import PushJSON
import PushMatching
import Synchronization

/// Subscriptions held in memory, as index and directory: what `replay` reads from its files,
/// and what tests use.
public final class InMemorySubscriptions: SubscriptionLookup, SubscriptionDirectory {
    struct State {
        var index: SubscriptionIndex
        var byHandle: [Int64: Subscription]
        var access = AccessIndex()
    }

    private let state: Mutex<State>

    /// Every subscription must have a distinct handle.
    public init(_ subscriptions: [Subscription]) {
        var byHandle: [Int64: Subscription] = [:]
        var records: [(app: String, path: Path, entry: SubscriptionIndex.Entry)] = []
        for subscription in subscriptions {
            guard let handle = subscription.handle else { preconditionFailure("InMemorySubscriptions: a subscription without handle") }
            byHandle[handle] = subscription
            records.append((subscription.app, subscription.path, .init(handle: handle, mode: subscription.mode)))
        }
        state = Mutex(State(index: SubscriptionIndex(bulkLoading: records), byHandle: byHandle))
    }

    public var count: Int { state.withLock { $0.byHandle.count } }

    public func concerned(app: String, path: Path) -> [IndexMatch] {
        state.withLock { $0.index.concerned(app: app, path: path) }
    }

    public func under(app: String, path: Path) -> [IndexMatch] {
        state.withLock { $0.index.under(app: app, path: path) }
    }

    public func apply(_ effects: IndexEffects) {
        guard !effects.isEmpty else { return }
        state.withLock { state in
            // Admissions first: a subscription is never admitted after it was forgotten.
            for admission in effects.admitted where state.byHandle[admission.handle] != nil {
                state.access.admit(admission.handle, app: admission.app, path: admission.path, auth: admission.auth, reads: admission.reads)
            }
            for (app, match) in effects.forgotten {
                state.index.remove(app: app, path: match.path, handle: match.handle)
                state.byHandle[match.handle] = nil
                state.access.forget(match.handle)
            }
        }
    }

    public func subscriptions(handles: [Int64]) async throws -> [Int64: Subscription] {
        state.withLock { state in
            var found: [Int64: Subscription] = [:]
            for handle in handles { found[handle] = state.byHandle[handle] }
            return found
        }
    }

    public func accessAffected(app: String, path: Path) -> [Int64] {
        state.withLock { $0.access.affected(app: app, path: path) }
    }

    public func accessEntry(_ handle: Int64) -> AccessIndex.Entry? {
        state.withLock { $0.access.entry(handle) }
    }

    public func isAdmitted(_ handle: Int64) -> Bool {
        state.withLock { $0.access.isAdmitted(handle) }
    }

    /// Records an evaluation that allowed a subscription (tests: subscriptions admitted at start).
    public func admit(_ handle: Int64, app: String, path: Path, auth: JSON, reads: [Path]) {
        state.withLock { $0.access.admit(handle, app: app, path: path, auth: auth, reads: reads) }
    }
}
