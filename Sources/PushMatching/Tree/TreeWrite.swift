import PushCore
import PushJSON

/// One write to a data tree, validated and normalised: what a `put` or `patch` record does.
public enum TreeWrite: Sendable, Equatable {
    /// Set the value at a path; `nil` deletes.
    case put(Path, JSON?)
    /// Set several values below a path in one atomic write. No relative key list is a prefix
    /// of another.
    case patch(Path, [PatchUpdate])

    public struct PatchUpdate: Sendable, Equatable {
        /// Keys below the patch path.
        public let keys: [Key]
        /// The new value; `nil` deletes.
        public let value: JSON?

        public init(keys: [Key], value: JSON?) {
            self.keys = keys
            self.value = value
        }
    }

    /// A `put` of `data` (any JSON, `null` deletes) at `path`.
    public static func put(at path: Path, data: JSON) throws(DataError) -> TreeWrite {
        .put(path, try data.treeNormalized(at: path))
    }

    /// A `patch` at `path`: `data` is an object whose keys are relative paths (SPEC §11.2).
    public static func patch(at path: Path, data: JSON) throws(DataError) -> TreeWrite {
        guard case .object(let object) = data else {
            throw DataError(.patchNotObject(got: data.typeName))
        }
        var updates: [PatchUpdate] = []
        updates.reserveCapacity(object.count)
        for (key, value) in object {
            let keys: [Key]
            do {
                keys = try Path.strictRelativeKeys(key.string)
            } catch {
                throw DataError(.invalidPatchKey(key.string, error))
            }
            let target = path.appending(keys)
            let length = target.string.utf8.count
            if length > Path.maxBytes {
                throw DataError(.invalidPatchKey(key.string, PathError(.pathTooLong(bytes: length))))
            }
            updates.append(PatchUpdate(keys: keys, value: try value.treeNormalized(at: target)))
        }
        // In key-list order, a key that is a prefix of others comes right before them.
        updates.sort { lexicographicallyPrecedes($0.keys, $1.keys) }
        for i in updates.indices.dropFirst() {
            let previous = updates[i - 1].keys
            let current = updates[i].keys
            if previous.count <= current.count && zip(previous, current).allSatisfy({ $0 == $1 }) {
                throw DataError(
                    .overlappingPatchKeys(
                        previous.map(\.string).joined(separator: "/"), current.map(\.string).joined(separator: "/")))
            }
        }
        return .patch(path, updates)
    }

    /// The path written: every change of the write lies at or below it.
    public var path: Path {
        switch self {
        case .put(let path, _), .patch(let path, _): return path
        }
    }
}

/// Key-list order: key by key in key order, a prefix before its extensions.
func lexicographicallyPrecedes(_ a: [Key], _ b: [Key]) -> Bool {
    for (x, y) in zip(a, b) {
        let c = Key.compare(x, y)
        if c != 0 { return c < 0 }
    }
    return a.count < b.count
}
