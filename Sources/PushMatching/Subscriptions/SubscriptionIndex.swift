import PushCore
import PushJSON

/// The in-memory index of subscriptions by (app, path): for a write at path W it finds the
/// subscriptions the write concerns (SPEC §6), those at W, above W and below W.
///
/// ## Shape
///
/// A forest of tries, one per application, whose edges are keys. Node 0 is the *forest root*:
/// its children are the application roots (edge label: the app id's UTF-8 bytes), whose
/// descendants are the paths of that application (edge labels: keys). A subscription lives at
/// the node of its path, as an ``Entry`` (the store's row id and the mode).
///
/// ## Storage (no heap object per node)
///
/// - `nodes`: one flat array of ``NodeRecord`` (32 bytes), indexed by a `UInt32` node id. A node
///   holds its parent, the head of its child list, its previous and next siblings (so that a
///   node is unlinked in O(1) even under a parent with a million children), where its key's
///   bytes are in `keyBytes`, and where its entries are in `entries`.
/// - `keyBytes`: one byte arena holding every node's key (app id for application roots).
/// - `edges`: a ``SlotTable`` (open addressing) keyed by (parent id, key bytes) hashed with
///   `Hasher`, which Swift seeds per process: child lookup costs one hash and a probe run
///   whatever the number of children, and clients cannot aim keys at one bucket.
/// - `entries`: one flat array of ``EntryRecord`` (16 bytes). A node's entries are contiguous,
///   in a block whose capacity is a power of two (see `SubscriptionIndex+Entries.swift`), so
///   that enumerating them reads adjacent memory. `handles`, a second ``SlotTable`` keyed by
///   (node id, handle), gives the position of a handle's entry at a node in O(1), so insertion
///   (which replaces the mode of an existing handle) and removal do not scan a node holding,
///   say, 100,000 subscribers.
/// - Freed nodes and entry blocks go to free lists and are reused. Freed key bytes stay in the
///   arena until they outnumber the live ones; then the arena is rebuilt (compaction).
///
/// Arrays only grow (their capacity is the high-water mark, as with `Array` and `Dictionary`);
/// they grow by half their size, which bounds unused capacity to a third.
/// ``init(bulkLoading:)`` sizes them exactly and lays nodes out in path order.
///
/// Per subscription at `/users/{uid}/notifications` (two nodes each, 28-byte uids), bulk
/// loaded: 2 × 32 (nodes) + 41 (keys) + 2 × 8 / 0.7 (edges) + 16 (entry) + 8 / 0.7 (handles)
/// ≈ 155 bytes.
///
/// ## Invariants
///
/// 1. Every node other than the forest root has entries or children: removal prunes nodes left
///    with neither, up to (and including) the application root. Hence W's subtree holds only
///    nodes that lead to entries, and its walk costs O(entries below W × their depth below W).
/// 2. `edges` holds exactly one slot per live node other than the forest root, and `handles`
///    one slot per live entry, holding its current position.
/// 3. Within one parent, keys differ by UTF-8 bytes; keys are never compared as `String`s
///    (canonical equivalence would merge `é` and `e\u{301}`).
/// 4. Id 0 means "none" in node links: node 0 is the forest root, which is nobody's child or
///    sibling. Entry position 0 is never used (`SlotTable` reserves id 0).
/// 5. `keyBytes.count` = the live nodes' key bytes + `freedKeyBytes`.
/// 6. Every entry record belongs to exactly one block, live (a node's) or free.
///
/// ``invariantViolation()`` checks all of them (for tests).
///
/// ## Costs
///
/// ``forEachMatch(app:path:_:)``: O(depth of W) hashed lookups, plus O(1) per matching node,
/// plus the walk of W's subtree (invariant 1). ``insert(app:path:entry:)`` and
/// ``remove(app:path:handle:)``: O(depth) hashed lookups, amortised O(1) growth, block moves
/// and compaction. Amortised, not worst case: an insertion that grows an array copies it
/// (O(size), ~20 ms for 60 MB), and growing a table re-places its slots.
///
/// Limits (checked by preconditions): 2³² − 2 nodes and entries, 4 GiB of key bytes, keys and
/// app ids of at most 65,535 bytes (paths allow 768, app ids 128).
///
/// A value type: copies share storage until one of them is mutated (then that one copies every
/// array, O(size)).
public struct SubscriptionIndex: Sendable {
    /// One subscription as the index knows it: the store's row id and its mode.
    public struct Entry: Sendable, Hashable {
        public let handle: Int64
        public let mode: Mode

        public init(handle: Int64, mode: Mode) {
            self.handle = handle
            self.mode = mode
        }
    }

    /// Where a subscription at S lies relative to a write at W.
    public enum Relation: Sendable, Hashable {
        /// S is above W.
        case ancestor
        /// S is W.
        case same
        /// S is below W.
        case descendant
    }

    var nodes: [NodeRecord]
    var keyBytes: [UInt8]
    /// Key bytes of freed nodes still in `keyBytes`.
    var freedKeyBytes = 0
    var edges: SlotTable
    /// Head of the free node list (linked through `nextSibling`), 0 when empty.
    var freeNode: UInt32 = 0

    var entries: [EntryRecord]
    var handles: SlotTable
    /// For each size class (block of `1 << class` entries), the start of the first free block,
    /// 0 when there is none.
    var freeBlocks = [UInt32](repeating: 0, count: 33)

    /// The arena is compacted only once at least this many bytes are freed (and more are freed
    /// than live), so that small indexes do not compact all the time.
    var compactionMinimum = 64 * 1024
    /// Number of compactions so far (for tests).
    var compactions = 0

    /// Number of entries.
    public internal(set) var count = 0

    public init() {
        self.init(minimumCapacity: 0)
    }

    /// An index with room for `minimumCapacity` subscriptions (and as many nodes) before it
    /// grows: the bulk load of a store. (``init(bulkLoading:)`` sizes everything exactly.)
    public init(minimumCapacity: Int) {
        self.init(minimumCapacity: minimumCapacity, nodeCapacity: minimumCapacity, keyByteCapacity: 0)
    }

    init(minimumCapacity: Int, nodeCapacity: Int, keyByteCapacity: Int) {
        precondition(minimumCapacity >= 0 && nodeCapacity >= 0 && keyByteCapacity >= 0, "SubscriptionIndex: negative capacity")
        nodes = []
        nodes.reserveCapacity(nodeCapacity + 1)
        nodes.append(.forestRoot)
        entries = []
        entries.reserveCapacity(minimumCapacity + 1)
        entries.append(.unused)  // position 0: never used, so that `handles` may hold every position
        keyBytes = []
        keyBytes.reserveCapacity(keyByteCapacity)
        edges = SlotTable(minimumCapacity: nodeCapacity)
        handles = SlotTable(minimumCapacity: minimumCapacity)
    }

    /// Bytes held by the index's buffers: capacity × stride of every array.
    public var footprint: Int {
        nodes.capacity * MemoryLayout<NodeRecord>.stride + keyBytes.capacity + edges.footprint
            + entries.capacity * MemoryLayout<EntryRecord>.stride + handles.footprint
            + freeBlocks.capacity * MemoryLayout<UInt32>.stride
    }

    /// Adds an entry at (app, path). If an entry with the same handle is already at that node,
    /// its mode is replaced. O(depth) hashed lookups.
    public mutating func insert(app: String, path: Path, entry: Entry) {
        var node = withUTF8Bytes(app) { findOrAddChild(of: 0, key: $0) }
        for key in path.keys {
            node = withUTF8Bytes(key.string) { findOrAddChild(of: node, key: $0) }
        }
        addEntry(entry, at: node)
    }

    /// Removes the entry with this handle at (app, path); `false` if absent. Nodes left without
    /// entries and children are freed. O(depth) hashed lookups (and, rarely, a compaction of the
    /// key arena, amortised over the bytes freed since the previous one).
    @discardableResult
    public mutating func remove(app: String, path: Path, handle: Int64) -> Bool {
        let node = self.node(app: app, path: path)
        guard node != 0, removeEntry(handle: handle, at: node) else { return false }
        prune(from: node)
        return true
    }

    /// The node at (app, path), or 0 when there is none. O(depth) hashed lookups.
    func node(app: String, path: Path) -> UInt32 {
        var node = withUTF8Bytes(app) { child(of: 0, key: $0) }
        for key in path.keys where node != 0 {
            node = withUTF8Bytes(key.string) { child(of: node, key: $0) }
        }
        return node
    }
}
