import PushCore

extension SubscriptionIndex {
    /// Sizes of the index, for metrics and benchmarks. The byte figures add up to
    /// ``SubscriptionIndex/footprint``.
    public struct Statistics: Sendable, Equatable {
        /// Live nodes (application roots and path nodes).
        public var nodes: Int
        /// Key bytes of the live nodes.
        public var liveKeyBytes: Int
        /// Key bytes of freed nodes, held until the next compaction of the arena.
        public var freedKeyBytes: Int
        /// Capacity × stride of the node array.
        public var nodeBytes: Int
        /// Capacity of the key arena.
        public var keyArenaBytes: Int
        /// Slots of the edge table × 8.
        public var edgeTableBytes: Int
        /// Capacity × stride of the entry array.
        public var entryBytes: Int
        /// Slots of the (node, handle) table × 8.
        public var handleTableBytes: Int
    }

    /// Current sizes. O(1).
    public var statistics: Statistics {
        Statistics(
            nodes: edges.count, liveKeyBytes: keyBytes.count - freedKeyBytes, freedKeyBytes: freedKeyBytes,
            nodeBytes: nodes.capacity * MemoryLayout<NodeRecord>.stride, keyArenaBytes: keyBytes.capacity,
            edgeTableBytes: edges.footprint, entryBytes: entries.capacity * MemoryLayout<EntryRecord>.stride,
            handleTableBytes: handles.footprint)
    }
}
