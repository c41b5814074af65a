import PushCore

extension SubscriptionIndex {
    /// Checks every structural invariant of the index and returns the first one broken, or
    /// `nil`. O(size of the index): for tests, never on a hot path.
    func invariantViolation() -> String? {
        if nodes.isEmpty || nodes[0].parent != 0 || nodes[0].entryCount != 0 || nodes[0].nextSibling != 0 {
            return "the forest root is damaged"
        }
        var liveNodes = 0
        var liveEntries = 0
        var liveKeyBytes = 0
        var seen = [Bool](repeating: false, count: nodes.count)
        // Which entry records belong to a live or a free block: each to exactly one.
        var owned = [Bool](repeating: false, count: entries.count)
        owned[0] = true
        // Every node reached from the root, through child lists checked in both directions.
        var stack: [UInt32] = [0]
        while let parent = stack.popLast() {
            var previous: UInt32 = 0
            var child = nodes[Int(parent)].firstChild
            while child != 0 {
                if Int(child) >= nodes.count || seen[Int(child)] { return "node \(child) is linked twice or out of range" }
                seen[Int(child)] = true
                let record = nodes[Int(child)]
                if record.parent != parent { return "node \(child) names \(record.parent) as parent, not \(parent)" }
                if record.previousSibling != previous { return "node \(child) has a wrong previous sibling" }
                if record.entryCount == 0 && record.firstChild == 0 { return "node \(child) is empty (not pruned)" }
                if Int(record.keyOffset) + Int(record.keyLength) > keyBytes.count { return "node \(child) key out of the arena" }
                let found = keyBytes.withUnsafeBufferPointer { arena in
                    self.child(of: parent, key: UnsafeBufferPointer(
                        rebasing: arena[Int(record.keyOffset) ..< Int(record.keyOffset) + Int(record.keyLength)]))
                }
                if found != child { return "node \(child) is not found through the edge table (found \(found))" }
                liveNodes += 1
                liveKeyBytes += Int(record.keyLength)
                if let problem = checkEntries(of: child, owned: &owned) { return problem }
                liveEntries += Int(record.entryCount)
                stack.append(child)
                previous = child
                child = record.nextSibling
            }
        }
        if edges.count != liveNodes { return "edge table holds \(edges.count) slots for \(liveNodes) nodes" }
        if handles.count != liveEntries { return "handle table holds \(handles.count) slots for \(liveEntries) entries" }
        if count != liveEntries { return "count is \(count) for \(liveEntries) entries" }
        if keyBytes.count != liveKeyBytes + freedKeyBytes { return "arena accounting is off" }
        var freeNodes = 0
        var free = freeNode
        while free != 0 {
            if !nodes[Int(free)].isFree || seen[Int(free)] { return "free node \(free) is live" }
            freeNodes += 1
            if freeNodes >= nodes.count { return "the free node list loops" }
            free = nodes[Int(free)].nextSibling
        }
        if liveNodes + freeNodes + 1 != nodes.count { return "nodes leak: \(liveNodes) live, \(freeNodes) free" }
        for sizeClass in freeBlocks.indices {
            var block = freeBlocks[sizeClass]
            while block != 0 {
                if let problem = own(block: block, size: 1 << sizeClass, in: &owned, by: "free block of class \(sizeClass)") {
                    return problem
                }
                block = UInt32(truncatingIfNeeded: entries[Int(block)].handle)
            }
        }
        if let unowned = owned.firstIndex(of: false) { return "entry record \(unowned) is in no block (leak)" }
        return nil
    }

    private func checkEntries(of node: UInt32, owned: inout [Bool]) -> String? {
        let record = nodes[Int(node)]
        if record.entryCount == 0 {
            return record.entryStart == 0 && record.entryClass == 0 ? nil : "node \(node) keeps a block without entries"
        }
        let capacity = 1 << Int(record.entryClass)
        if Int(record.entryCount) > capacity { return "node \(node) holds more entries than its block" }
        if record.entryClass > 0 && Int(record.entryCount) <= capacity / 4 { return "node \(node) has a block 4 times too large" }
        if let problem = own(block: record.entryStart, size: capacity, in: &owned, by: "node \(node)") { return problem }
        var handlesHere = Set<Int64>()
        for position in record.entryStart ..< record.entryStart + record.entryCount {
            let handle = entries[Int(position)].handle
            if !handlesHere.insert(handle).inserted { return "handle \(handle) twice at node \(node)" }
            let tag = Self.entryTag(node: node, handle: handle)
            guard let slot = handleSlot(node: node, handle: handle, tag: tag), handles.id(at: slot) == position else {
                return "entry \(position) of node \(node) is not found through the handle table"
            }
        }
        return nil
    }

    private func own(block start: UInt32, size: Int, in owned: inout [Bool], by owner: String) -> String? {
        if start == 0 || Int(start) + size > entries.count { return "\(owner): block at \(start) out of range" }
        for position in Int(start) ..< Int(start) + size {
            if owned[position] { return "\(owner): record \(position) belongs to two blocks" }
            owned[position] = true
        }
        return nil
    }
}
