import PushCore
import PushJSON
import PushMatching

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
