import PushContracts
import PushCore
import PushMatching
import Synchronization

/// The data trees as the record engine holds them, for the read-rule checks of the REST API
/// (``RulesAccess``): published after each batch. A single instance publishes every tree (an
/// application it has none of has an empty one). A shared instance publishes the trees of the
/// applications it holds, and reads the others from the store, at most once a second each: the
/// owner evaluates every new subscription against its own tree before records reach it, so
/// a check against a slightly older tree never lets data through.
public final class TreeView: TreeSource, Sendable {
    private let published = Mutex<[String: DataTree]>([:])
    private let loaded = Mutex<[String: (tree: DataTree, at: Int64)]>([:])
    /// Shared instances: where the trees of applications held elsewhere are read from.
    let store: (any IngestStore)?
    let clock: any ServiceClock
    static let reloadAfter: Int64 = 1_000

    public init(store: (any IngestStore)?, clock: any ServiceClock) {
        self.store = store
        self.clock = clock
    }

    public func publish(_ tree: DataTree, app: String) {
        published.withLock { $0[app] = tree }
    }

    public func withdraw(app: String) {
        _ = published.withLock { $0.removeValue(forKey: app) }
    }

    public func tree(app: String) async throws -> DataTree {
        if let tree = published.withLock({ $0[app] }) { return tree }
        guard let store else { return DataTree() }
        let now = clock.now
        if let cached = loaded.withLock({ $0[app] }), now.saturatingSubtracting(cached.at) < Self.reloadAfter { return cached.tree }
        let tree = try await TreeLoader.tree(app: app, from: store).tree
        loaded.withLock { $0[app] = (tree, now) }
        return tree
    }
}
