import PushCore

/// One subscription at one node: 8 + 1 bytes, stride 16.
struct EntryRecord: Sendable {
    /// For the first record of a free block: the start of the next free block of its size.
    var handle: Int64
    var mode: Mode

    static let unused = EntryRecord(handle: 0, mode: .noData)
}

/// Entry storage: the entries of a node are contiguous, in a block of `entries` whose capacity is
/// a power of two (the node's `entryClass` is its base-2 logarithm).
///
/// - Adding to a full block moves the entries to a block twice as large; removing swaps the last
///   entry into the hole, and a block left a quarter full moves to one half as large. Moves are
///   amortised O(1) per operation (doubling and halving with hysteresis), but the one operation
///   that triggers a move pays O(entries of the node): one hashed lookup per entry, on the
///   order of 0.1 s for a node with a million subscribers.
/// - Every move of an entry updates its slot in `handles` (found by its tag and its old position),
///   so `handles` always maps (node, handle) to the current position.
/// - Freed blocks go to a free list per size (linked through their first record) and are reused
///   for blocks of the same size only. The array keeps its high-water mark.
///
/// Why blocks rather than a linked list per node: enumerating a node's entries reads adjacent
/// records instead of chasing one pointer per entry through memory; with 20 entries inserted
/// in random order that is 20 dependent cache misses saved per write.
extension SubscriptionIndex {
    /// The tag of (node, handle) in `handles`.
    @inline(__always)
    static func entryTag(node: UInt32, handle: Int64) -> UInt32 {
        var hasher = Hasher()
        hasher.combine(node)
        hasher.combine(handle)
        return fold(hasher.finalize())
    }

    /// The smallest size class holding `count` entries.
    static func entryClass(for count: Int) -> UInt8 {
        count <= 1 ? 0 : UInt8(Int.bitWidth - (count - 1).leadingZeroBitCount)
    }

    /// The slot in `handles` of the entry with `handle` at `node`, or `nil`. O(1) expected.
    func handleSlot(node: UInt32, handle: Int64, tag: UInt32) -> Int? {
        let record = nodes[Int(node)]
        let start = record.entryStart
        let end = record.entryStart + record.entryCount
        return entries.withUnsafeBufferPointer { entries in
            handles.find(tag: tag, matching: { id in
                id >= start && id < end && entries[Int(id)].handle == handle
            })
        }
    }

    /// Adds `entry` to `node`, or replaces the mode of the entry with the same handle already
    /// there. A node without entries gets a block for `expectedCount` entries. O(1) expected,
    /// plus an amortised O(1) share of block moves.
    mutating func addEntry(_ entry: Entry, at node: UInt32, expectedCount: Int = 1) {
        let tag = Self.entryTag(node: node, handle: entry.handle)
        if nodes[Int(node)].entryCount != 0, let slot = handleSlot(node: node, handle: entry.handle, tag: tag) {
            entries[Int(handles.id(at: slot))].mode = entry.mode
            return
        }
        precondition(count < Int(UInt32.max) - 1, "SubscriptionIndex: more than 2^32 - 2 entries")
        if nodes[Int(node)].entryCount == 0 {
            let sizeClass = Self.entryClass(for: expectedCount)
            nodes[Int(node)].entryStart = allocateBlock(sizeClass)
            nodes[Int(node)].entryClass = sizeClass
        } else if nodes[Int(node)].entryCount == 1 << nodes[Int(node)].entryClass {
            moveBlock(of: node, to: nodes[Int(node)].entryClass + 1)
        }
        let position = nodes[Int(node)].entryStart + nodes[Int(node)].entryCount
        entries[Int(position)] = EntryRecord(handle: entry.handle, mode: entry.mode)
        nodes[Int(node)].entryCount += 1
        handles.insert(tag: tag, id: position)
        count += 1
    }

    /// Removes the entry with `handle` at `node`; `false` if there is none. O(1) expected, plus
    /// an amortised O(1) share of block moves. Leaves the node in place, even if empty: the
    /// caller prunes.
    mutating func removeEntry(handle: Int64, at node: UInt32) -> Bool {
        let tag = Self.entryTag(node: node, handle: handle)
        guard let slot = handleSlot(node: node, handle: handle, tag: tag) else { return false }
        let position = handles.id(at: slot)
        handles.remove(at: slot)
        let record = nodes[Int(node)]
        let last = record.entryStart + record.entryCount - 1
        if position != last {
            let moved = entries[Int(last)]
            entries[Int(position)] = moved
            relocate(handle: moved.handle, at: node, from: last, to: position)
        }
        entries[Int(last)] = .unused
        nodes[Int(node)].entryCount -= 1
        count -= 1
        let remaining = Int(record.entryCount) - 1
        if remaining == 0 {
            freeBlock(at: record.entryStart, sizeClass: record.entryClass)
            nodes[Int(node)].entryStart = 0
            nodes[Int(node)].entryClass = 0
        } else if record.entryClass > 0 && remaining <= (1 << Int(record.entryClass)) / 4 {
            moveBlock(of: node, to: record.entryClass - 1)
        }
        return true
    }

    /// Moves `node`'s entries to a new block of size class `sizeClass` and frees the old one.
    /// O(entries of the node).
    private mutating func moveBlock(of node: UInt32, to sizeClass: UInt8) {
        let record = nodes[Int(node)]
        let start = allocateBlock(sizeClass)
        for offset in 0 ..< record.entryCount {
            let entry = entries[Int(record.entryStart + offset)]
            entries[Int(start + offset)] = entry
            entries[Int(record.entryStart + offset)] = .unused
            relocate(handle: entry.handle, at: node, from: record.entryStart + offset, to: start + offset)
        }
        freeBlock(at: record.entryStart, sizeClass: record.entryClass)
        nodes[Int(node)].entryStart = start
        nodes[Int(node)].entryClass = sizeClass
    }

    /// Points the `handles` slot of an entry that moved at its new position.
    private mutating func relocate(handle: Int64, at node: UInt32, from old: UInt32, to new: UInt32) {
        guard let slot = handles.find(tag: Self.entryTag(node: node, handle: handle), matching: { $0 == old }) else {
            preconditionFailure("SubscriptionIndex: entry at \(old) missing from the handle table")
        }
        handles.setID(new, at: slot)
    }

    /// The start of a free block of `1 << sizeClass` entries: a freed one of that size, or
    /// one appended to `entries` (amortised O(1) per entry).
    private mutating func allocateBlock(_ sizeClass: UInt8) -> UInt32 {
        let head = freeBlocks[Int(sizeClass)]
        if head != 0 {
            freeBlocks[Int(sizeClass)] = UInt32(truncatingIfNeeded: entries[Int(head)].handle)
            entries[Int(head)] = .unused
            return head
        }
        let size = 1 << Int(sizeClass)
        precondition(entries.count + size <= Int(UInt32.max), "SubscriptionIndex: entry array beyond 2^32 records")
        reserveForAppend(&entries, size)
        let start = UInt32(entries.count)
        entries.append(contentsOf: repeatElement(.unused, count: size))
        return start
    }

    private mutating func freeBlock(at start: UInt32, sizeClass: UInt8) {
        entries[Int(start)].handle = Int64(freeBlocks[Int(sizeClass)])
        freeBlocks[Int(sizeClass)] = start
    }
}
