import PushCore
import PushJSON

extension SubscriptionIndex {
    /// A node handed to ``SubscriptionIndex/forEachMatch(app:path:_:)``. Valid until the index is
    /// next mutated (a removal may free the node and a later insertion reuse its id).
    public struct NodeReference: Sendable, Hashable {
        let id: UInt32
    }

    /// The entries of one node, in no particular order. A view of the index's entry array
    /// (adjacent records): making one retains that array, nothing is allocated. Use it within
    /// the `forEachMatch` call: a copy kept alive makes the index's next mutation copy the whole
    /// entry array (copy-on-write), and shows the entries as they were.
    public struct EntrySequence: RandomAccessCollection, Sendable {
        let entries: [EntryRecord]
        let start: Int
        public let count: Int

        public var startIndex: Int { 0 }
        public var endIndex: Int { count }

        public subscript(position: Int) -> Entry {
            precondition(position >= 0 && position < count, "EntrySequence: index out of range")
            let record = entries[start + position]
            return Entry(handle: record.handle, mode: record.mode)
        }

        init(_ entries: [EntryRecord], _ node: NodeRecord) {
            self.entries = entries
            self.start = Int(node.entryStart)
            self.count = Int(node.entryCount)
        }
    }

    /// Calls `body` once per node holding entries that a write at (app, path) concerns
    /// (SPEC §6): the ancestors of `path` from the application root down, then the node at
    /// `path`, then its descendants (parents before children, siblings in no particular order).
    ///
    /// Cost: one hashed child lookup per key of `path` (stopping at the first missing one), one
    /// call per node with entries, and a walk of the subtree at `path`, which holds only nodes
    /// leading to entries (so the walk is O(entries below × their depth below `path`)).
    /// Independent of the number of subscriptions elsewhere and of the number of children of
    /// any node. Allocates nothing.
    public func forEachMatch(app: String, path: Path, _ body: (Relation, NodeReference, EntrySequence) -> Void) {
        var node = withUTF8Bytes(app) { child(of: 0, key: $0) }
        if node == 0 { return }
        for key in path.keys {
            let record = nodes[Int(node)]
            if record.entryCount != 0 {
                body(.ancestor, NodeReference(id: node), EntrySequence(entries, record))
            }
            node = withUTF8Bytes(key.string) { child(of: node, key: $0) }
            if node == 0 { return }
        }
        let record = nodes[Int(node)]
        if record.entryCount != 0 {
            body(.same, NodeReference(id: node), EntrySequence(entries, record))
        }
        nodes.withUnsafeBufferPointer { nodes in
            Self.forEachNode(under: node, in: nodes) { descendant in
                let record = nodes[Int(descendant)]
                if record.entryCount != 0 {
                    body(.descendant, NodeReference(id: descendant), EntrySequence(entries, record))
                }
            }
        }
    }

    /// The path of a node handed to ``forEachMatch(app:path:_:)``: O(depth), and it allocates
    /// the path, so call it only when needed (for descendants; an ancestor's path is a prefix
    /// of the write's).
    public func path(of node: NodeReference) -> Path {
        precondition(
            Int(node.id) < nodes.count && node.id != 0 && !nodes[Int(node.id)].isFree,
            "SubscriptionIndex: a node reference used after the node was freed")
        var chain: [UInt32] = []
        var current = node.id
        // Stop at the application root, whose parent is the forest root.
        while nodes[Int(current)].parent != 0 {
            chain.append(current)
            current = nodes[Int(current)].parent
        }
        return Path(uncheckedKeys: chain.reversed().map { key(of: $0) })
    }
}
