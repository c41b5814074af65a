/// A subscription the index found for a write: its store handle, mode and path.
public struct IndexMatch: Sendable, Hashable {
    public let handle: Int64
    public let mode: Mode
    public let path: Path

    public init(handle: Int64, mode: Mode, path: Path) {
        self.handle = handle
        self.mode = mode
        self.path = path
    }
}

/// Where the record pipeline finds subscriptions: the in-memory index, kept in step with the
/// store (the service's registry, or the subscriptions `replay` reads). Staging reads it and
/// changes nothing: what records do to it comes back as ``IndexEffects``, applied once their
/// batch committed.
public protocol SubscriptionLookup: Sendable {
    /// The subscriptions a write at (app, path) concerns: at, above and below the path
    /// (SPEC §6).
    func concerned(app: String, path: Path) -> [IndexMatch]

    /// The subscriptions at or below `path`.
    func under(app: String, path: Path) -> [IndexMatch]

    // Read access (SPEC §12.5): see ``AccessIndex``.

    /// The admitted subscriptions whose access evaluation read a value a write at `path` may
    /// have changed.
    func accessAffected(app: String, path: Path) -> [Int64]

    /// What an admitted subscription's evaluation depended on.
    func accessEntry(_ handle: Int64) -> AccessIndex.Entry?

    /// Whether a subscription's access was evaluated against the data it now sees.
    func isAdmitted(_ handle: Int64) -> Bool

    /// Applies what staged records did (``IndexEffects``), once their batch committed: the
    /// subscriptions they revoked are forgotten (their read access too), the admissions
    /// recorded.
    func apply(_ effects: IndexEffects)
}

/// The stored subscriptions, by handle: what payloads need beyond the index (kind, format,
/// encryption, context, id).
public protocol SubscriptionDirectory: Sendable {
    /// The subscriptions with these handles that still exist.
    func subscriptions(handles: [Int64]) async throws -> [Int64: Subscription]
}

extension SubscriptionIndex {
    /// The subscriptions a write at (app, path) concerns (SPEC §6).
    public func concerned(app: String, path: Path) -> [IndexMatch] {
        var found: [IndexMatch] = []
        forEachMatch(app: app, path: path) { relation, node, entries in
            let nodePath = relation == .same ? path : self.path(of: node)
            for entry in entries { found.append(IndexMatch(handle: entry.handle, mode: entry.mode, path: nodePath)) }
        }
        return found
    }

    /// The subscriptions at or below `path`.
    public func under(app: String, path: Path) -> [IndexMatch] {
        var found: [IndexMatch] = []
        forEachMatch(app: app, path: path) { relation, node, entries in
            guard relation != .ancestor else { return }
            let nodePath = relation == .same ? path : self.path(of: node)
            for entry in entries { found.append(IndexMatch(handle: entry.handle, mode: entry.mode, path: nodePath)) }
        }
        return found
    }
}
