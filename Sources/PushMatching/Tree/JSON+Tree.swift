import PushCore
import PushJSON

extension JSON {
    /// The value as the data tree stores it at `path` (SPEC §3), or `nil` for "nothing".
    ///
    /// `null` is nothing; arrays become objects keyed by element index (`null` elements dropped,
    /// the others keep their index); members that are nothing are dropped, and an object left
    /// empty is nothing. Every key must be valid (SPEC §2) and every node's path at most 2048
    /// bytes. Unchanged subtrees are shared, not rebuilt.
    public func treeNormalized(at path: Path) throws(DataError) -> JSON? {
        var normalizer = TreeNormalizer(base: path)
        return try normalizer.normalize(self, pathBytes: path.isRoot ? 0 : path.string.utf8.count)
    }
}

/// Walks a written value, keeping the keys above the current node to name it in errors.
struct TreeNormalizer {
    let base: Path
    var keys: [Key] = []

    init(base: Path) {
        self.base = base
    }

    func location() -> String {
        base.appending(keys).string
    }

    /// - Parameter pathBytes: canonical length of the current node's path, 0 for the root.
    mutating func normalize(_ value: JSON, pathBytes: Int) throws(DataError) -> JSON? {
        switch value {
        case .null:
            return nil
        case .bool, .int, .double, .string:
            return value
        case .array(let elements):
            var entries = ContiguousArray<JSONObject.Member>()
            entries.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                let key = Key(String(index))
                let childBytes = pathBytes + 1 + key.byteCount
                try checkLength(childBytes, key: key)
                keys.append(key)
                let child = try normalize(element, pathBytes: childBytes)
                keys.removeLast()
                if let child { entries.append(JSONObject.Member(key, child)) }
            }
            // Index keys are integer keys: already in key order.
            return entries.isEmpty ? nil : .object(JSONObject(sortedUniqueEntries: entries))
        case .object(let object):
            var entries = ContiguousArray<JSONObject.Member>()
            var changed = false
            for (key, member) in object {
                do {
                    try Path.validateKey(key)
                } catch {
                    throw DataError(.invalidValue(at: location(), error))
                }
                let childBytes = pathBytes + 1 + key.byteCount
                try checkLength(childBytes, key: key)
                keys.append(key)
                let child = try normalize(member, pathBytes: childBytes)
                keys.removeLast()
                if let child {
                    if !changed, case .object(let before) = member, case .object(let after) = child,
                        !before.isIdentical(to: after)
                    {
                        changed = true
                    } else if !changed, case .array = member {
                        changed = true
                    }
                    entries.append(JSONObject.Member(key, child))
                } else {
                    changed = true
                }
            }
            if entries.isEmpty { return nil }
            return changed ? .object(JSONObject(sortedUniqueEntries: entries)) : value
        }
    }

    func checkLength(_ bytes: Int, key: Key) throws(DataError) {
        if bytes > Path.maxBytes {
            throw DataError(.invalidValue(at: base.appending(keys + [key]).string, PathError(.pathTooLong(bytes: bytes))))
        }
    }
}
