/// A JSON object: an immutable map from ``Key`` to ``JSON``, members always in key order.
///
/// It is a persistent B-tree. An object of up to ``BTreeNode/maxLeaf`` members is one sorted
/// array; larger ones are a tree of such arrays. Updates copy only the nodes on the path to the
/// changed member (O(log n) nodes of at most 32 slots each), so the previous version remains
/// valid and shares everything else: keeping the "before" tree of a write costs O(depth).
public struct JSONObject: Sendable {
    /// A member as iterated: `for (key, value) in object`.
    public typealias Entry = (key: Key, value: JSON)

    /// A member as stored: a struct, so arrays of members copy with specialised code.
    public struct Member: Sendable {
        public let key: Key
        public let value: JSON

        @inlinable
        public init(_ key: Key, _ value: JSON) {
            self.key = key
            self.value = value
        }
    }

    @usableFromInline
    var root: BTreeNode

    @usableFromInline
    init(root: BTreeNode) {
        self.root = root
    }

    /// The empty object.
    public init() {
        root = .leaf([])
    }

    /// An object of these members, in any order. When a key repeats, the later member wins
    /// (as JavaScript's and Python's parsers do).
    public init(_ members: some Sequence<(Key, JSON)>) {
        var entries = ContiguousArray<Member>()
        for (key, value) in members { entries.append(Member(key, value)) }
        JSONObject.sortRemovingDuplicates(&entries)
        root = BTreeNode.build(entries)
    }

    /// An object of members already in strictly increasing key order (not checked in release
    /// builds).
    public init(sortedUniqueEntries entries: ContiguousArray<Member>) {
        assert(JSONObject.isStrictlySorted(entries), "entries must be in strictly increasing key order")
        root = BTreeNode.build(entries)
    }

    /// Number of members.
    @inlinable public var count: Int { root.count }

    @inlinable public var isEmpty: Bool { root.count == 0 }

    /// The member named `key`, if any.
    @inlinable public subscript(key: Key) -> JSON? {
        root.find(key)
    }

    /// This object with `key` set to `value` (added or replaced).
    public func setting(_ key: Key, to value: JSON) -> JSONObject {
        let result = root.setting(key, value)
        guard let sibling = result.sibling else { return JSONObject(root: result.node) }
        return JSONObject(root: .inner(BTreeInner(children: [result.node, sibling])))
    }

    /// This object without `key`; the same object when it has no such member.
    public func removing(_ key: Key) -> JSONObject {
        guard var node = root.removing(key) else { return self }
        // A root with a single child gives way to that child.
        while case .inner(let inner) = node, inner.children.count == 1 {
            node = inner.children[0]
        }
        return JSONObject(root: node)
    }

    public mutating func set(_ key: Key, to value: JSON) {
        self = setting(key, to: value)
    }

    public mutating func remove(_ key: Key) {
        self = removing(key)
    }

    /// The keys, in key order.
    public var keys: [Key] {
        var keys: [Key] = []
        keys.reserveCapacity(count)
        forEach { keys.append($0.key) }
        return keys
    }

    /// Calls `body` for each member in key order.
    @inlinable
    public func forEach(_ body: (Entry) throws -> Void) rethrows {
        try root.forEach { try body(($0.key, $0.value)) }
    }

    /// Calls `body` with each leaf (a sorted run of members) in key order.
    @inlinable
    public func forEachLeaf(_ body: (ContiguousArray<Member>) throws -> Void) rethrows {
        try root.forEachLeaf(body)
    }

    /// Whether both objects are the same stored value (not just equal).
    @inlinable
    public func isIdentical(to other: JSONObject) -> Bool {
        root.isIdentical(to: other.root)
    }

    /// The height of the tree: 1 for an object stored as a single sorted array.
    public var height: Int { root.height }
}

extension JSONObject: Sequence {
    public struct Iterator: IteratorProtocol {
        @usableFromInline var stack: [(BTreeInner, Int)] = []
        @usableFromInline var leaf: ContiguousArray<Member>
        @usableFromInline var index = 0

        @usableFromInline
        init(root: BTreeNode) {
            leaf = []
            descend(root)
        }

        @usableFromInline
        mutating func descend(_ start: BTreeNode) {
            var node = start
            while true {
                switch node {
                case .leaf(let entries):
                    leaf = entries
                    index = 0
                    return
                case .inner(let inner):
                    stack.append((inner, 1))
                    node = inner.children[0]
                }
            }
        }

        @inlinable
        public mutating func next() -> Entry? {
            while true {
                if index < leaf.count {
                    defer { index += 1 }
                    let member = leaf[index]
                    return (member.key, member.value)
                }
                guard let (inner, next) = stack.popLast() else { return nil }
                if next < inner.children.count {
                    stack.append((inner, next + 1))
                    descend(inner.children[next])
                }
            }
        }
    }

    public func makeIterator() -> Iterator {
        Iterator(root: root)
    }

    public var underestimatedCount: Int { count }
}

extension JSONObject: Equatable {
    /// Equal members in the same order, values compared as SPEC §11.1 says.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        if lhs.isIdentical(to: rhs) { return true }
        guard lhs.count == rhs.count else { return false }
        var other = rhs.makeIterator()
        for entry in lhs {
            guard let theirs = other.next(), entry.key == theirs.key, entry.value == theirs.value else {
                return false
            }
        }
        return true
    }
}

extension JSONObject {
    static func isStrictlySorted(_ entries: ContiguousArray<Member>) -> Bool {
        var i = 1
        while i < entries.count {
            if Key.compare(entries[i - 1].key, entries[i].key) >= 0 { return false }
            i += 1
        }
        return true
    }

    /// Sorts members into key order; of equal keys, the last one stays.
    static func sortRemovingDuplicates(_ entries: inout ContiguousArray<Member>) {
        if isStrictlySorted(entries) { return }
        let n = entries.count
        var sorted = ContiguousArray<Member>()
        sorted.reserveCapacity(n)
        if n <= 16 {
            // Stable insertion sort; an equal key replaces the earlier one.
            for entry in entries {
                var position = sorted.count
                var duplicate = false
                while position > 0 {
                    let c = Key.compare(sorted[position - 1].key, entry.key)
                    if c < 0 { break }
                    if c == 0 { duplicate = true; break }
                    position -= 1
                }
                if duplicate {
                    sorted[position - 1] = entry
                } else {
                    sorted.insert(entry, at: position)
                }
            }
        } else {
            let order = entries.indices.sorted { a, b in
                let c = Key.compare(entries[a].key, entries[b].key)
                return c < 0 || (c == 0 && a < b)
            }
            for index in order {
                if let last = sorted.last, last.key == entries[index].key {
                    sorted[sorted.count - 1] = entries[index]
                } else {
                    sorted.append(entries[index])
                }
            }
        }
        entries = sorted
    }
}
