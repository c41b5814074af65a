import Logging
import PushCore
import Synchronization

/// The in-memory subscription index, kept in step with the store.
///
/// The store logs every committed change (`SubscriptionStore.changes`); the registry applies
/// them in order, each once, under a mutex: soon after this process's own writes (a
/// ``nudge()`` wakes the ``IndexSyncer``; a burst of writes costs one read of the log) and
/// every second for everyone else's (an operator command, another instance). Lookups read the
/// index under the same mutex, for microseconds.
public final class SubscriptionRegistry: Sendable {
    struct State {
        var index = SubscriptionIndex()
        /// The last change applied to `index`.
        var applied: Int64 = 0
    }

    let store: any SubscriptionStore
    let state = Mutex(State())
    let logger: Logger

    let nudges: AsyncStream<Void>
    let nudgeContinuation: AsyncStream<Void>.Continuation

    public init(store: any SubscriptionStore, logger: Logger) {
        self.store = store
        self.logger = logger
        // Only the latest nudge matters: a sync applies everything committed before it.
        (nudges, nudgeContinuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Asks for a ``sync()`` soon (after a write of this process); returns at once.
    public func nudge() {
        nudgeContinuation.yield()
    }

    /// Builds the index from the store. Changes committed meanwhile are applied by the next
    /// ``sync()`` (applying is idempotent).
    public func load(batch: Int = 10_000) async throws {
        // The log may be pruned between reading the table and following the log (by another
        // process); then read the table again.
        var attempt = 0
        while true {
            attempt += 1
            do {
                try await loadOnce(batch: batch)
                return
            } catch let error as StoreError {
                guard case .changeLogPruned = error.code, attempt < 5 else { throw error }
            }
        }
    }

    private func loadOnce(batch: Int) async throws {
        let start = try await store.lastChange()
        var records: [(app: String, path: Path, entry: SubscriptionIndex.Entry)] = []
        var after: Int64 = 0
        while true {
            let page = try await store.indexRecords(after: after, limit: batch)
            records += page.map { ($0.app, $0.path, SubscriptionIndex.Entry(handle: $0.handle, mode: $0.mode)) }
            guard let last = page.last else { break }
            after = last.handle
        }
        // The bulk load sizes every buffer exactly and keeps subtrees together in memory.
        let index = SubscriptionIndex(bulkLoading: records)
        records = []
        state.withLock { state in
            state.index = index
            state.applied = start
        }
        try await applyChanges()
    }

    /// Applies the changes committed since the last one applied. When the log was pruned past
    /// them (this process fell that far behind), the changes in between are lost to it: the
    /// index is rebuilt from the table instead of going on wrong.
    public func sync() async throws {
        do {
            try await applyChanges()
        } catch let error as StoreError {
            guard case .changeLogPruned(let through) = error.code else { throw error }
            logger.warning(
                "the subscription change log was pruned past this index; reloading it from the store",
                metadata: ["applied": "\(appliedChange)", "prunedThrough": "\(through)"])
            try await load()
        }
    }

    private func applyChanges() async throws {
        while true {
            let after = state.withLock { $0.applied }
            let changes = try await store.changes(after: after, limit: 1_000)
            guard !changes.isEmpty else { return }
            state.withLock { state in
                for change in changes where change.sequence > state.applied {
                    switch change.operation {
                    case .insert, .update:
                        state.index.insert(app: change.app, path: change.path, entry: .init(handle: change.handle, mode: change.mode))
                    case .delete:
                        state.index.remove(app: change.app, path: change.path, handle: change.handle)
                    }
                    state.applied = change.sequence
                }
            }
        }
    }

    /// The last change applied.
    public var appliedChange: Int64 { state.withLock { $0.applied } }

    /// Number of subscriptions in the index.
    public var count: Int { state.withLock { $0.index.count } }

    /// Runs `body` with the index (for lookups; keep it short: writers wait).
    public func withIndex<R>(_ body: (borrowing SubscriptionIndex) throws -> R) rethrows -> R {
        try state.withLock { try body($0.index) }
    }
}
