import PushCore
import PushJSON

/// What the record pipeline remembers of each subscription's read access (SPEC §12.5): whether
/// its access was evaluated against the data it now sees (admitted), and, when the evaluation
/// read data, the claims it was evaluated with and the paths it read, indexed so that a write
/// finds the subscriptions whose answer it may change in O(depth of the write) plus what
/// matches — never by looking at all of them.
///
/// Only applications whose rules read data are tracked; a value type without locks (the
/// registry keeps it behind its mutex).
public struct AccessIndex: Sendable {
    /// An admitted subscription whose evaluation read data.
    public struct Entry: Sendable, Equatable {
        public var app: String
        /// The subscribed node.
        public var path: Path
        /// `{"uid": …, "token": {claims}}`.
        public var auth: JSON
        /// What the evaluation read.
        public var reads: [Path]
    }

    var entries: [Int64: Entry] = [:]
    /// Admitted subscriptions whose evaluation read nothing: no write changes their answer.
    var admittedWithoutReads: Set<Int64> = []
    /// The read paths, by application, pointing back at their subscriptions.
    var dependencies = SubscriptionIndex()

    public init() {}

    /// Number of admitted subscriptions.
    public var count: Int { entries.count + admittedWithoutReads.count }

    public func isAdmitted(_ handle: Int64) -> Bool {
        entries[handle] != nil || admittedWithoutReads.contains(handle)
    }

    public func entry(_ handle: Int64) -> Entry? { entries[handle] }

    /// Records an evaluation that allowed `handle` (replacing an earlier one).
    public mutating func admit(_ handle: Int64, app: String, path: Path, auth: JSON, reads: [Path]) {
        forget(handle)
        if reads.isEmpty {
            admittedWithoutReads.insert(handle)
            return
        }
        entries[handle] = Entry(app: app, path: path, auth: auth, reads: reads)
        for read in reads {
            dependencies.insert(app: app, path: read, entry: .init(handle: handle, mode: .noData))
        }
    }

    /// Forgets a subscription (removed, revoked, or to be evaluated again).
    public mutating func forget(_ handle: Int64) {
        admittedWithoutReads.remove(handle)
        guard let entry = entries.removeValue(forKey: handle) else { return }
        for read in entry.reads {
            _ = dependencies.remove(app: entry.app, path: read, handle: handle)
        }
    }

    /// The admitted subscriptions whose evaluation read a value that a write at `path` may have
    /// changed: a read at, above or below it.
    public func affected(app: String, path: Path) -> [Int64] {
        var handles: [Int64] = []
        dependencies.forEachMatch(app: app, path: path) { _, _, matched in
            for entry in matched { handles.append(entry.handle) }
        }
        return handles
    }
}
