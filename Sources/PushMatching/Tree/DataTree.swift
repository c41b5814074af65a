import PushCore
import PushJSON

/// One application's data: a JSON tree (SPEC §3).
///
/// A value type over persistent objects: a copy taken before a write (the "before" tree) costs
/// nothing, and the write copies only the nodes on its path.
public struct DataTree: Sendable, Equatable {
    /// The whole tree; `nil` when empty. Always tree-normalised: no `null`s, no arrays, no
    /// empty objects.
    public private(set) var root: JSON?

    public init(root: JSON? = nil) {
        self.root = root
    }

    /// The value at `path`, or `nil` when there is nothing there.
    public func value(at path: Path) -> JSON? {
        var node = root
        for key in path.keys {
            guard case .object(let object)? = node else { return nil }
            node = object[key]
        }
        return node
    }

    /// Applies a write. A patch is applied as a whole.
    public mutating func apply(_ write: TreeWrite) {
        switch write {
        case .put(let path, let value):
            root = DataTree.setting(root, path.keys[...], value)
        case .patch(let path, let updates):
            var newRoot = root
            for update in updates {
                newRoot = DataTree.setting(newRoot, (path.keys + update.keys)[...], update.value)
            }
            root = newRoot
        }
    }

    /// The tree after a write; this one is unchanged.
    public func applying(_ write: TreeWrite) -> DataTree {
        var copy = self
        copy.apply(write)
        return copy
    }

    /// `node` with the value at `keys` below it set to `value` (`nil` deletes). Objects left
    /// empty disappear, up to the root; writing below a primitive replaces it with an object.
    static func setting(_ node: JSON?, _ keys: ArraySlice<Key>, _ value: JSON?) -> JSON? {
        guard let key = keys.first else { return value }
        let object: JSONObject
        if case .object(let existing)? = node {
            object = existing
        } else {
            // Nothing to delete below a primitive or below nothing.
            guard value != nil else { return node }
            object = JSONObject()
        }
        let child = object[key]
        if let newChild = setting(child, keys.dropFirst(), value) {
            return .object(object.setting(key, to: newChild))
        }
        guard child != nil else { return node }
        let remaining = object.removing(key)
        return remaining.isEmpty ? nil : .object(remaining)
    }
}
