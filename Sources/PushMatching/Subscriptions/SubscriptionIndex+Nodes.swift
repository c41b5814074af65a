import PushCore
import PushJSON

/// One node of the trie: 7 × 4 + 2 + 1 bytes, stride 32.
struct NodeRecord: Sendable {
    /// The parent's id; 0 for application roots; ``NodeRecord/freeMarker`` for a freed node.
    var parent: UInt32
    var firstChild: UInt32
    /// For a freed node: the next free node.
    var nextSibling: UInt32
    var previousSibling: UInt32
    /// The key's bytes: `keyBytes[keyOffset ..< keyOffset + keyLength]`.
    var keyOffset: UInt32
    /// The node's entries: `entries[entryStart ..< entryStart + entryCount]`, in a block of
    /// `1 << entryClass` records. `entryStart` is 0 when the node has no entries.
    var entryStart: UInt32
    var entryCount: UInt32
    var keyLength: UInt16
    var entryClass: UInt8

    /// `parent` of a node on the free list (no live node has it: ids stop at 2³² − 2).
    static let freeMarker = UInt32.max

    static let forestRoot = NodeRecord(parent: 0, firstChild: 0, nextSibling: 0, previousSibling: 0)

    init(parent: UInt32, firstChild: UInt32, nextSibling: UInt32, previousSibling: UInt32, keyOffset: UInt32 = 0,
         keyLength: UInt16 = 0) {
        self.parent = parent
        self.firstChild = firstChild
        self.nextSibling = nextSibling
        self.previousSibling = previousSibling
        self.keyOffset = keyOffset
        self.entryStart = 0
        self.entryCount = 0
        self.keyLength = keyLength
        self.entryClass = 0
    }

    var isFree: Bool { parent == NodeRecord.freeMarker }
}

extension SubscriptionIndex {
    /// The tag of the edge (parent, key) in `edges`: `Hasher`, seeded per process, folded to
    /// 32 bits. The message is the 4 parent bytes then the key bytes (SipHash's finalisation
    /// adds the length), so distinct edges give distinct messages.
    @inline(__always)
    static func edgeTag(parent: UInt32, key: UnsafeBufferPointer<UInt8>) -> UInt32 {
        var hasher = Hasher()
        hasher.combine(parent)
        hasher.combine(bytes: UnsafeRawBufferPointer(key))
        return fold(hasher.finalize())
    }

    @inline(__always)
    static func fold(_ hash: Int) -> UInt32 {
        UInt32(truncatingIfNeeded: hash) ^ UInt32(truncatingIfNeeded: hash >> 32)
    }

    /// The child of `parent` whose key is `key`, or 0. One hash, one probe run, and for each
    /// slot of the run with the same 32-bit tag (almost always only the match) a comparison of
    /// the parent id and the key bytes.
    @inline(__always)
    func child(of parent: UInt32, key: UnsafeBufferPointer<UInt8>) -> UInt32 {
        child(of: parent, key: key, tag: Self.edgeTag(parent: parent, key: key))
    }

    @inline(__always)
    func child(of parent: UInt32, key: UnsafeBufferPointer<UInt8>, tag: UInt32) -> UInt32 {
        nodes.withUnsafeBufferPointer { nodes in
            keyBytes.withUnsafeBufferPointer { arena in
                guard let slot = edges.find(tag: tag, matching: { id in
                    let node = nodes[Int(id)]
                    return node.parent == parent && Int(node.keyLength) == key.count
                        && bytesEqual(arena.baseAddress.map { $0 + Int(node.keyOffset) }, key.baseAddress, key.count)
                }) else { return 0 }
                return edges.id(at: slot)
            }
        }
    }

    /// The child of `parent` whose key is `key`, created (with no entries) if absent.
    mutating func findOrAddChild(of parent: UInt32, key: UnsafeBufferPointer<UInt8>) -> UInt32 {
        let tag = Self.edgeTag(parent: parent, key: key)
        let existing = child(of: parent, key: key, tag: tag)
        if existing != 0 { return existing }
        precondition(key.count <= Int(UInt16.max), "SubscriptionIndex: key of more than 65,535 bytes")
        precondition(keyBytes.count + key.count <= Int(UInt32.max), "SubscriptionIndex: more than 4 GiB of keys")
        reserveForAppend(&keyBytes, key.count)
        let offset = UInt32(keyBytes.count)
        keyBytes.append(contentsOf: key)
        let record = NodeRecord(
            parent: parent, firstChild: 0, nextSibling: nodes[Int(parent)].firstChild, previousSibling: 0,
            keyOffset: offset, keyLength: UInt16(key.count))
        let id: UInt32
        if freeNode != 0 {
            id = freeNode
            freeNode = nodes[Int(id)].nextSibling
            nodes[Int(id)] = record
        } else {
            precondition(nodes.count < Int(NodeRecord.freeMarker), "SubscriptionIndex: more than 2^32 - 2 nodes")
            id = UInt32(nodes.count)
            reserveForAppend(&nodes, 1)
            nodes.append(record)
        }
        if record.nextSibling != 0 {
            nodes[Int(record.nextSibling)].previousSibling = id
        }
        nodes[Int(parent)].firstChild = id
        edges.insert(tag: tag, id: id)
        return id
    }

    /// Frees `node` and then its ancestors for as long as they are left with neither entries
    /// nor children (invariant 1). O(nodes freed) plus, when the freed key bytes come to
    /// outnumber the live ones, a compaction.
    mutating func prune(from node: UInt32) {
        var current = node
        while current != 0 {
            let record = nodes[Int(current)]
            if record.entryCount != 0 || record.firstChild != 0 { break }
            let tag = keyBytes.withUnsafeBufferPointer { arena in
                Self.edgeTag(parent: record.parent, key: UnsafeBufferPointer(
                    rebasing: arena[Int(record.keyOffset) ..< Int(record.keyOffset) + Int(record.keyLength)]))
            }
            guard let slot = edges.find(tag: tag, matching: { $0 == current }) else {
                preconditionFailure("SubscriptionIndex: live node \(current) missing from the edge table")
            }
            edges.remove(at: slot)
            if record.previousSibling != 0 {
                nodes[Int(record.previousSibling)].nextSibling = record.nextSibling
            } else {
                nodes[Int(record.parent)].firstChild = record.nextSibling
            }
            if record.nextSibling != 0 {
                nodes[Int(record.nextSibling)].previousSibling = record.previousSibling
            }
            freedKeyBytes += Int(record.keyLength)
            nodes[Int(current)] = NodeRecord(
                parent: NodeRecord.freeMarker, firstChild: 0, nextSibling: freeNode, previousSibling: 0)
            freeNode = current
            current = record.parent
        }
        let liveKeyBytes = keyBytes.count - freedKeyBytes
        if freedKeyBytes > liveKeyBytes && freedKeyBytes >= compactionMinimum {
            compactKeyBytes()
        }
    }

    /// Rebuilds the arena with the live keys only, in depth-first order (so that siblings'
    /// keys end up next to each other). O(live nodes + live key bytes). Every key has at least
    /// one byte (only an empty app id has none, and there is at most one), so this is
    /// O(live key bytes), less than the bytes freed since the previous compaction: each
    /// removal pays for the bytes it freed, and compaction is amortised O(1) per freed byte.
    mutating func compactKeyBytes() {
        var compacted: [UInt8] = []
        compacted.reserveCapacity(keyBytes.count - freedKeyBytes)
        keyBytes.withUnsafeBufferPointer { arena in
            nodes.withUnsafeMutableBufferPointer { nodes in
                Self.forEachNode(under: 0, in: UnsafeBufferPointer(nodes)) { id in
                    let start = Int(nodes[Int(id)].keyOffset)
                    nodes[Int(id)].keyOffset = UInt32(compacted.count)
                    compacted.append(contentsOf: arena[start ..< start + Int(nodes[Int(id)].keyLength)])
                }
            }
        }
        keyBytes = compacted
        freedKeyBytes = 0
        compactions += 1
    }

    /// Calls `body` with every node strictly below `top`, parents before children, without a
    /// stack: the walk climbs back through `parent` links. O(nodes below `top`). `body` may
    /// change records through another pointer, but not the links of the tree.
    @inline(__always)
    static func forEachNode(under top: UInt32, in nodes: UnsafeBufferPointer<NodeRecord>, _ body: (UInt32) -> Void) {
        var current = nodes[Int(top)].firstChild
        while current != 0 {
            body(current)
            let firstChild = nodes[Int(current)].firstChild
            if firstChild != 0 {
                current = firstChild
                continue
            }
            // Climb to the nearest node (current or an ancestor below `top`) with a next sibling.
            while true {
                let record = nodes[Int(current)]
                if record.nextSibling != 0 {
                    current = record.nextSibling
                    break
                }
                current = record.parent
                if current == top {
                    current = 0
                    break
                }
            }
        }
    }

    /// The key of a live node, as a `Key` (a copy of its bytes).
    func key(of node: UInt32) -> Key {
        let record = nodes[Int(node)]
        let start = Int(record.keyOffset)
        return Key(String(decoding: keyBytes[start ..< start + Int(record.keyLength)], as: UTF8.self))
    }
}

/// Grows `array`'s capacity by half when `extra` more elements would not fit, so that unused
/// capacity stays below a third of the total (`Array` alone would double). Amortised O(1).
@inline(__always)
func reserveForAppend<Element>(_ array: inout [Element], _ extra: Int) {
    let needed = array.count + extra
    if needed > array.capacity {
        array.reserveCapacity(max(needed, array.capacity + array.capacity / 2, 16))
    }
}

/// Whether `count` bytes at `a` and `b` are equal, eight at a time.
@inline(__always)
func bytesEqual(_ a: UnsafePointer<UInt8>?, _ b: UnsafePointer<UInt8>?, _ count: Int) -> Bool {
    guard count > 0 else { return true }
    guard let a, let b else { return false }
    let x = UnsafeRawPointer(a)
    let y = UnsafeRawPointer(b)
    var index = 0
    while index + 8 <= count {
        if x.loadUnaligned(fromByteOffset: index, as: UInt64.self) != y.loadUnaligned(fromByteOffset: index, as: UInt64.self) {
            return false
        }
        index += 8
    }
    while index < count {
        if a[index] != b[index] { return false }
        index += 1
    }
    return true
}
