import PushCore
import PushJSON

/// Whether a subscriber may read a node (SPEC §12): an application's read rules, over its data
/// as the service holds it now. The REST API asks it at every create and refresh.
public protocol ReadAccess: Sendable {
    /// Whether `auth` (`{"uid": …, "token": {claims}}`) may read the node at `path`.
    func allows(path: Path, auth: JSON) async throws -> Bool
}

/// Where an application's data tree is read from, outside the record engine.
public protocol TreeSource: Sendable {
    /// The application's tree as the service holds it now.
    func tree(app: String) async throws -> DataTree
}

/// An application's read rules over a tree source: what the REST API asks.
public struct RulesAccess: ReadAccess {
    public let app: String
    public let rules: ReadRules
    public let trees: any TreeSource
    public let clock: any ServiceClock

    public init(app: String, rules: ReadRules, trees: any TreeSource, clock: any ServiceClock) {
        self.app = app
        self.rules = rules
        self.trees = trees
        self.clock = clock
    }

    public func allows(path: Path, auth: JSON) async throws -> Bool {
        // Rules that never read data need no tree.
        let tree = rules.readsData ? try await trees.tree(app: app) : DataTree()
        return rules.evaluate(path: path, auth: auth, tree: tree, now: clock.now).allowed
    }
}
