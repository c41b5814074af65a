/// A node of ``JSONObject``'s persistent B-tree. Nodes are never mutated once built: an update
/// builds new nodes along one root-to-leaf path and shares the rest.
///
/// Invariants: all leaves are at the same depth; entries are in strictly increasing key order
/// across leaves; every node but the root holds at least ``minLeaf`` entries (leaves) or
/// ``minInner`` children (inner nodes), and at most ``maxLeaf`` / ``maxInner``.
@usableFromInline
enum BTreeNode: Sendable {
    case leaf(ContiguousArray<JSONObject.Member>)
    case inner(BTreeInner)

    @usableFromInline static let maxLeaf = 32
    @usableFromInline static let minLeaf = 16
    @usableFromInline static let maxInner = 32
    @usableFromInline static let minInner = 16
}

/// An inner node: its children, the smallest key of each child, and the member count.
@usableFromInline
final class BTreeInner: Sendable {
    @usableFromInline let children: ContiguousArray<BTreeNode>
    @usableFromInline let firstKeys: ContiguousArray<Key>
    @usableFromInline let count: Int

    @usableFromInline
    init(children: ContiguousArray<BTreeNode>) {
        var keys = ContiguousArray<Key>()
        keys.reserveCapacity(children.count)
        var total = 0
        for child in children {
            keys.append(child.firstKey)
            total += child.count
        }
        self.children = children
        self.firstKeys = keys
        self.count = total
    }

    /// A node whose first keys and count are known: an update that replaced one child by a node
    /// with the same first key shares its predecessor's keys (one retain of their storage
    /// instead of one per key).
    @usableFromInline
    init(children: ContiguousArray<BTreeNode>, firstKeys: ContiguousArray<Key>, count: Int) {
        self.children = children
        self.firstKeys = firstKeys
        self.count = count
    }

    /// Index of the child whose key range holds `key`.
    @inlinable
    func childIndex(for key: Key) -> Int {
        // First index whose first key is greater than `key`, minus one.
        var low = 1
        var high = firstKeys.count
        while low < high {
            let mid = (low + high) / 2
            if Key.compare(firstKeys[mid], key) <= 0 {
                low = mid + 1
            } else {
                high = mid
            }
        }
        return low - 1
    }
}

extension BTreeNode {
    @inlinable var count: Int {
        switch self {
        case .leaf(let entries): return entries.count
        case .inner(let inner): return inner.count
        }
    }

    /// Number of slots used: entries of a leaf, children of an inner node.
    @inlinable var width: Int {
        switch self {
        case .leaf(let entries): return entries.count
        case .inner(let inner): return inner.children.count
        }
    }

    @inlinable var isUnderfull: Bool {
        switch self {
        case .leaf(let entries): return entries.count < BTreeNode.minLeaf
        case .inner(let inner): return inner.children.count < BTreeNode.minInner
        }
    }

    @inlinable var firstKey: Key {
        switch self {
        case .leaf(let entries): return entries[0].key
        case .inner(let inner): return inner.firstKeys[0]
        }
    }

    var height: Int {
        switch self {
        case .leaf: return 1
        case .inner(let inner): return 1 + inner.children[0].height
        }
    }

    @inlinable
    func isIdentical(to other: BTreeNode) -> Bool {
        switch (self, other) {
        case let (.inner(a), .inner(b)):
            return a === b
        case let (.leaf(a), .leaf(b)):
            return leafIdentity(a) == leafIdentity(b) && a.count == b.count
        default:
            return false
        }
    }

    /// Index of `key` in a sorted leaf, or the index where it would be inserted.
    @inlinable
    static func search(_ entries: ContiguousArray<JSONObject.Member>, _ key: Key) -> (index: Int, found: Bool) {
        withUTF8Bytes(key.string) { keyBytes in
            let keyInteger = Key.integerValue(of: keyBytes)
            var low = 0
            var high = entries.count
            while low < high {
                let mid = (low + high) / 2
                let c = withUTF8Bytes(entries[mid].key.string) { midBytes -> Int in
                    let midInteger = Key.integerValue(of: midBytes)
                    switch (midInteger, keyInteger) {
                    case let (x?, y?): return x < y ? -1 : (x == y ? 0 : 1)
                    case (.some, nil): return -1
                    case (nil, .some): return 1
                    case (nil, nil): return lexicographicCompare(midBytes, keyBytes)
                    }
                }
                if c == 0 { return (mid, true) }
                if c < 0 { low = mid + 1 } else { high = mid }
            }
            return (low, false)
        }
    }

    /// Recursive rather than a loop over a `var node`: each level is borrowed where it lies
    /// (a loop retains and releases every node it passes).
    @inlinable
    func find(_ key: Key) -> JSON? {
        switch self {
        case .leaf(let entries):
            let (index, found) = BTreeNode.search(entries, key)
            return found ? entries[index].value : nil
        case .inner(let inner):
            return inner.children[inner.childIndex(for: key)].find(key)
        }
    }

    @inlinable
    func forEach(_ body: (JSONObject.Member) throws -> Void) rethrows {
        switch self {
        case .leaf(let entries):
            for entry in entries { try body(entry) }
        case .inner(let inner):
            for child in inner.children { try child.forEach(body) }
        }
    }

    @inlinable
    func forEachLeaf(_ body: (ContiguousArray<JSONObject.Member>) throws -> Void) rethrows {
        switch self {
        case .leaf(let entries):
            try body(entries)
        case .inner(let inner):
            for child in inner.children { try child.forEachLeaf(body) }
        }
    }

    /// Sets `key` to `value`. Returns the new node, a new right sibling when the node had to
    /// split, and whether a member was added (rather than replaced).
    func setting(_ key: Key, _ value: JSON) -> (node: BTreeNode, sibling: BTreeNode?, added: Bool) {
        switch self {
        case .leaf(var entries):
            let (index, found) = BTreeNode.search(entries, key)
            if found {
                entries[index] = JSONObject.Member(key, value)
                return (.leaf(entries), nil, false)
            }
            entries.insert(JSONObject.Member(key, value), at: index)
            if entries.count <= BTreeNode.maxLeaf {
                return (.leaf(entries), nil, true)
            }
            let half = entries.count / 2
            return (.leaf(ContiguousArray(entries[..<half])), .leaf(ContiguousArray(entries[half...])), true)
        case .inner(let inner):
            let index = inner.childIndex(for: key)
            let result = inner.children[index].setting(key, value)
            var children = inner.children
            children[index] = result.node
            guard let sibling = result.sibling else {
                let firstKey = result.node.firstKey
                let keys: ContiguousArray<Key>
                if firstKey == inner.firstKeys[index] {
                    keys = inner.firstKeys
                } else {
                    var changed = inner.firstKeys
                    changed[index] = firstKey
                    keys = changed
                }
                return (.inner(BTreeInner(children: children, firstKeys: keys, count: inner.count + (result.added ? 1 : 0))), nil, result.added)
            }
            children.insert(sibling, at: index + 1)
            if children.count <= BTreeNode.maxInner {
                return (.inner(BTreeInner(children: children)), nil, result.added)
            }
            let half = children.count / 2
            return (
                .inner(BTreeInner(children: ContiguousArray(children[..<half]))),
                .inner(BTreeInner(children: ContiguousArray(children[half...]))),
                result.added
            )
        }
    }

    /// Removes `key`. Returns `nil` when there was no such member. The result may be underfull;
    /// the parent rebalances it.
    func removing(_ key: Key) -> BTreeNode? {
        switch self {
        case .leaf(var entries):
            let (index, found) = BTreeNode.search(entries, key)
            guard found else { return nil }
            entries.remove(at: index)
            return .leaf(entries)
        case .inner(let inner):
            let index = inner.childIndex(for: key)
            guard let child = inner.children[index].removing(key) else { return nil }
            var children = inner.children
            if !child.isUnderfull || children.count == 1 {
                children[index] = child
            } else {
                // Merge with a sibling, or share the members of both evenly.
                let left = index > 0 ? index - 1 : index
                let pair = index > 0 ? (children[left], child) : (child, children[index + 1])
                children.replaceSubrange(left...(left + 1), with: BTreeNode.concatenate(pair.0, pair.1))
            }
            return .inner(BTreeInner(children: children))
        }
    }

    /// One node, or two evenly filled ones, holding the members of two adjacent nodes of the
    /// same level.
    static func concatenate(_ left: BTreeNode, _ right: BTreeNode) -> [BTreeNode] {
        switch (left, right) {
        case let (.leaf(a), .leaf(b)):
            let all = a + b
            if all.count <= maxLeaf { return [.leaf(all)] }
            let half = all.count / 2
            return [.leaf(ContiguousArray(all[..<half])), .leaf(ContiguousArray(all[half...]))]
        case let (.inner(a), .inner(b)):
            let all = a.children + b.children
            if all.count <= maxInner { return [.inner(BTreeInner(children: all))] }
            let half = all.count / 2
            return [
                .inner(BTreeInner(children: ContiguousArray(all[..<half]))),
                .inner(BTreeInner(children: ContiguousArray(all[half...]))),
            ]
        default:
            preconditionFailure("B-tree siblings at different levels")
        }
    }

    /// A balanced tree of sorted, unique entries.
    static func build(_ entries: ContiguousArray<JSONObject.Member>) -> BTreeNode {
        if entries.count <= maxLeaf { return .leaf(entries) }
        var level = ContiguousArray<BTreeNode>()
        for range in evenChunks(entries.count, maximum: maxLeaf) {
            level.append(.leaf(ContiguousArray(entries[range])))
        }
        while level.count > 1 {
            var next = ContiguousArray<BTreeNode>()
            for range in evenChunks(level.count, maximum: maxInner) {
                next.append(.inner(BTreeInner(children: ContiguousArray(level[range]))))
            }
            level = next
        }
        return level[0]
    }

    /// Splits `count` slots into the fewest chunks of at most `maximum`, sizes differing by one
    /// at most (so each holds at least half of `maximum` when there are several).
    static func evenChunks(_ count: Int, maximum: Int) -> [Range<Int>] {
        let chunks = (count + maximum - 1) / maximum
        let base = count / chunks
        let extra = count % chunks
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(chunks)
        var start = 0
        for i in 0..<chunks {
            let size = base + (i < extra ? 1 : 0)
            ranges.append(start..<(start + size))
            start += size
        }
        return ranges
    }

    /// Checks the invariants; for tests.
    func validate(isRoot: Bool = true) -> String? {
        switch self {
        case .leaf(let entries):
            if !isRoot && entries.count < BTreeNode.minLeaf { return "leaf with \(entries.count) entries" }
            if entries.count > BTreeNode.maxLeaf { return "leaf with \(entries.count) entries" }
            if !JSONObject.isStrictlySorted(entries) { return "leaf out of order" }
            return nil
        case .inner(let inner):
            let n = inner.children.count
            if (!isRoot && n < BTreeNode.minInner) || n > BTreeNode.maxInner || n < 2 {
                return "inner node with \(n) children"
            }
            let height = inner.children[0].height
            var previousLast: Key?
            for (i, child) in inner.children.enumerated() {
                if child.height != height { return "children at different heights" }
                if let problem = child.validate(isRoot: false) { return problem }
                if !(child.firstKey == inner.firstKeys[i]) { return "stale first key" }
                if let last = previousLast, Key.compare(last, child.firstKey) >= 0 { return "children out of order" }
                var lastKey: Key?
                child.forEach { lastKey = $0.key }
                previousLast = lastKey
            }
            if inner.count != inner.children.reduce(0, { $0 + $1.count }) { return "stale count" }
            return nil
        }
    }
}

/// The address of a leaf's storage, to recognise shared leaves.
@inlinable
package func leafIdentity(_ entries: ContiguousArray<JSONObject.Member>) -> UnsafeRawPointer? {
    entries.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
}

extension JSONObject {
    /// Checks the B-tree invariants; `nil` when they hold. For tests.
    public func validateStructure() -> String? {
        root.validate()
    }
}
