import Logging
import PushContracts
import PushCore
import PushMatching
import Synchronization

/// The in-memory subscription index, kept in step with the store.
///
/// The store logs every committed change (`SubscriptionStore.changes`); the registry applies
/// them in order, each once, under a mutex: soon after this process's own writes (a
/// ``nudge()`` wakes the ``IndexSyncer``; a burst of writes costs one read of the log) and
/// every second for everyone else's (an operator command, another instance). Lookups read the
/// index under the same mutex, for microseconds.
///
/// It is also the pipeline's directory of subscriptions: the documents payloads need (kind,
/// format, encryption, token) are read from the store on demand and cached, at most
/// ``cacheLimit`` of them; a change in the log evicts its subscription.
public final class SubscriptionRegistry: SubscriptionLookup, SubscriptionDirectory, SubscriptionIndexFollower, Sendable {
    struct State {
        var index = SubscriptionIndex()
        /// The last change applied to `index`.
        var applied: Int64 = 0
        var cache: [Int64: Subscription] = [:]
        /// Cached handles in insertion order (the oldest is evicted first).
        var cacheOrder: [Int64] = []
        var cacheHead = 0
        /// Read access (SPEC §12.5): what each admitted subscription's evaluation read.
        var access = AccessIndex()
        /// Subscriptions created or changed since the record engine last took them, by
        /// handle → application: their access is evaluated before records reach them.
        var admissions: [Int64: String] = [:]
    }

    public static let cacheLimit = 65_536

    /// Catch-ups in progress (``catchUp()``): one reads the log at a time, for everyone.
    struct CatchUps {
        /// A read of the log is running (its caller reads again while others wait).
        var running = false
        /// Reads of the log started, and finished.
        var started = 0
        var finished = 0
        /// Callers waiting for the read numbered `after` or a later one to finish.
        var waiting: [(after: Int, continuation: CheckedContinuation<Bool, Never>)] = []
    }

    let store: any SubscriptionStore
    let state = Mutex(State())
    let catchUps = Mutex(CatchUps())
    let logger: Logger

    let nudges: AsyncStream<Void>
    let nudgeContinuation: AsyncStream<Void>.Continuation

    /// Told when subscriptions wait for their admission (the record engine's queue).
    let admissionsWaiting: (any Wakeable)?
    /// The applications whose rules read data: only their new and changed subscriptions wait
    /// for an admission (the others' answer cannot depend on the tree).
    let admitting: Set<String>

    /// - Parameters:
    ///   - admitting: the applications whose read rules read data (SPEC §12.5).
    public init(store: any SubscriptionStore, admitting: Set<String> = [], admissionsWaiting: (any Wakeable)? = nil, logger: Logger) {
        self.store = store
        self.admitting = admitting
        self.admissionsWaiting = admissionsWaiting
        self.logger = logger
        // Only the latest nudge matters: a sync applies everything committed before it.
        (nudges, nudgeContinuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Asks for a ``sync()`` soon (after a write of this process); returns at once.
    public func nudge() {
        nudgeContinuation.yield()
    }

    /// Applies what was committed up to now (read-your-writes: the REST API calls it before it
    /// answers); when the store cannot be read, asks for a sync soon instead.
    ///
    /// Concurrent callers share reads: each waits for a read that *started* after it was
    /// called (so it saw the caller's commit), and one caller at a time reads for all who wait.
    /// (Reading once per caller made N concurrent creates read N times what N had written: the
    /// API's throughput fell as connections rose.)
    public func catchUp() async {
        enum Role { case read, wait(after: Int) }
        let role = catchUps.withLock { state -> Role in
            if state.running { return .wait(after: state.started + 1) }
            state.running = true
            return .read
        }
        switch role {
        case .wait(let after):
            let served = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = catchUps.withLock { state -> Bool? in
                    if state.finished >= after { return true }
                    // The reader stopped before a read for this caller: none runs now.
                    if !state.running { return false }
                    state.waiting.append((after, continuation))
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
            if !served { await catchUp() }
        case .read:
            while true {
                let number = catchUps.withLock { state -> Int in
                    state.started += 1
                    return state.started
                }
                do {
                    try await sync()
                } catch {
                    nudge()
                }
                let (woken, more) = catchUps.withLock { state -> ([CheckedContinuation<Bool, Never>], Bool) in
                    state.finished = number
                    let woken = state.waiting.filter { $0.after <= number }.map(\.continuation)
                    state.waiting.removeAll { $0.after <= number }
                    if state.waiting.isEmpty { state.running = false }
                    return (woken, !state.waiting.isEmpty)
                }
                for continuation in woken { continuation.resume(returning: true) }
                if !more { return }
            }
        }
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
                guard error.kind == .changeLogPruned, attempt < 5 else { throw error }
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
            guard error.kind == .changeLogPruned else { throw error }
            logger.warning(
                "the subscription change log was pruned past this index; reloading it from the store",
                metadata: ["applied": "\(appliedChange)", "prunedThrough": "\(error.prunedThrough ?? 0)"])
            try await load()
        }
    }

    private func applyChanges() async throws {
        while true {
            let after = state.withLock { $0.applied }
            let changes = try await store.changes(after: after, limit: 1_000)
            guard !changes.isEmpty else { return }
            let waiting = state.withLock { state -> Bool in
                for change in changes where change.sequence > state.applied {
                    switch change.operation {
                    case .insert, .update:
                        state.index.insert(app: change.app, path: change.path, entry: .init(handle: change.handle, mode: change.mode))
                        // New, or new claims: evaluated again before records reach it.
                        state.access.forget(change.handle)
                        if admitting.contains(change.app) { state.admissions[change.handle] = change.app }
                    case .delete:
                        state.index.remove(app: change.app, path: change.path, handle: change.handle)
                        state.access.forget(change.handle)
                        state.admissions[change.handle] = nil
                    }
                    if change.operation != .insert { state.cache[change.handle] = nil }
                    state.applied = change.sequence
                }
                return !state.admissions.isEmpty
            }
            if waiting { admissionsWaiting?.wake() }
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

    // MARK: - The pipeline's view

    public func concerned(app: String, path: Path) -> [IndexMatch] {
        state.withLock { $0.index.concerned(app: app, path: path) }
    }

    public func under(app: String, path: Path) -> [IndexMatch] {
        state.withLock { $0.index.under(app: app, path: path) }
    }

    /// Applies what a committed batch's records did. An admission is not recorded for a
    /// subscription waiting for its admission again (created or changed after the batch took
    /// the waiting ones: its new claims are evaluated by the next batch); admissions go first,
    /// so that a subscription revoked after its admission stays forgotten.
    public func apply(_ effects: IndexEffects) {
        guard !effects.isEmpty else { return }
        state.withLock { state in
            for admission in effects.admitted where state.admissions[admission.handle] == nil {
                state.access.admit(admission.handle, app: admission.app, path: admission.path, auth: admission.auth, reads: admission.reads)
            }
            for (app, match) in effects.forgotten {
                _ = state.index.remove(app: app, path: match.path, handle: match.handle)
                state.cache[match.handle] = nil
                state.access.forget(match.handle)
                state.admissions[match.handle] = nil
            }
        }
    }

    // MARK: - Read access (SPEC §12.5)

    public func accessAffected(app: String, path: Path) -> [Int64] {
        state.withLock { $0.access.affected(app: app, path: path) }
    }

    public func accessEntry(_ handle: Int64) -> AccessIndex.Entry? {
        state.withLock { $0.access.entry(handle) }
    }

    public func isAdmitted(_ handle: Int64) -> Bool {
        state.withLock { $0.access.isAdmitted(handle) }
    }

    /// Takes the subscriptions waiting for their admission (created or changed since the last
    /// take): handle → application.
    public func takeAdmissions() -> [Int64: String] {
        state.withLock { state in
            defer { state.admissions = [:] }
            return state.admissions
        }
    }

    /// Number of subscriptions whose access is remembered.
    public var admittedCount: Int { state.withLock { $0.access.count } }

    public func subscriptions(handles: [Int64]) async throws -> [Int64: Subscription] {
        var found: [Int64: Subscription] = [:]
        var missing: [Int64] = []
        let applied = state.withLock { state -> Int64 in
            for handle in handles {
                if let subscription = state.cache[handle] {
                    found[handle] = subscription
                } else {
                    missing.append(handle)
                }
            }
            return state.applied
        }
        if missing.isEmpty { return found }
        let fetched = try await store.subscriptions(handles: missing)
        state.withLock { state in
            // A change applied meanwhile may make what was read stale: use it, do not keep it.
            guard state.applied == applied else { return }
            for (handle, subscription) in fetched where state.cache[handle] == nil {
                state.cache[handle] = subscription
                state.cacheOrder.append(handle)
            }
            while state.cache.count > Self.cacheLimit, state.cacheHead < state.cacheOrder.count {
                state.cache[state.cacheOrder[state.cacheHead]] = nil
                state.cacheHead += 1
            }
            if state.cacheHead > Self.cacheLimit {
                state.cacheOrder.removeFirst(state.cacheHead)
                state.cacheHead = 0
            }
        }
        found.merge(fetched) { old, _ in old }
        return found
    }
}
