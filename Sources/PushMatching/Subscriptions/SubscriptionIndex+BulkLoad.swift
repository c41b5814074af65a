import PushCore

extension SubscriptionIndex {
    /// Builds the index of a whole store at once (start-up).
    ///
    /// Compared with inserting one by one into `init(minimumCapacity:)`:
    /// - the subscriptions are inserted in (app, path) order, keys compared by bytes, so that the
    ///   nodes of every subtree are contiguous in memory, and a write's ancestors, its node and
    ///   its descendants share cache lines;
    /// - a counting pass over that order gives the exact number of nodes, key bytes and entry
    ///   records, so that every array and table is allocated once, at its final size;
    /// - the nodes a path shares with the previous one are not looked up again.
    ///
    /// Cost: O(total bytes of the paths) to lay out one sort key per subscription, an O(n log n)
    /// comparison sort, then two passes that read the sort keys sequentially. Temporary memory:
    /// the sort keys twice (the paths' bytes plus one byte per key) and 12 bytes per
    /// subscription.
    ///
    /// The same (app, path, handle) given twice keeps the last mode, as with
    /// ``insert(app:path:entry:)``.
    public init(bulkLoading subscriptions: [(app: String, path: Path, entry: Entry)]) {
        precondition(subscriptions.count < Int(UInt32.max), "SubscriptionIndex: more than 2^32 - 2 entries")
        let sorted = SortedPaths(subscriptions)
        guard sorted.isUsable else {
            // Sort keys that cannot delimit keys with a 0 byte (unvalidated: SPEC §2 forbids
            // control characters) or that would pass 4 GiB: insert through the general path.
            self.init(minimumCapacity: subscriptions.count)
            for position in sorted.order {
                let (app, path, entry) = subscriptions[Int(position)]
                insert(app: app, path: path, entry: entry)
            }
            return
        }
        // Runs of equal (app, path) are adjacent, and each adds the components (app, keys) past
        // those it shares with the previous run, plus a block for its distinct handles.
        var nodeCount = 0
        var byteCount = 0
        var entryRecords = 1  // position 0
        var start = 0
        while start < sorted.count {
            let (end, distinct) = sorted.run(from: start)
            let (_, sharedEnd) = sorted.shared(at: start)
            let components = sorted.componentCount(of: start, from: sharedEnd)
            nodeCount += components
            byteCount += sorted.range(start).upperBound - sharedEnd - components
            entryRecords += 1 << Int(Self.entryClass(for: distinct))
            start = end
        }
        self.init(minimumCapacity: subscriptions.count, nodeCapacity: nodeCount, keyByteCapacity: byteCount)
        entries.reserveCapacity(entryRecords)
        // The node ids of the previous run's components, from its application root down.
        var trail: [UInt32] = []
        start = 0
        while start < sorted.count {
            let (end, distinct) = sorted.run(from: start)
            let (sharedComponents, sharedEnd) = sorted.shared(at: start)
            trail.removeLast(trail.count - sharedComponents)
            sorted.bytes.withUnsafeBufferPointer { bytes in
                var componentStart = sharedEnd
                for index in sharedEnd ..< sorted.range(start).upperBound where bytes[index] == 0 {
                    let key = UnsafeBufferPointer(rebasing: bytes[componentStart ..< index])
                    trail.append(findOrAddChild(of: trail.last ?? 0, key: key))
                    componentStart = index + 1
                }
            }
            for index in start ..< end {
                addEntry(sorted.entry(index), at: trail.last!, expectedCount: distinct)
            }
            start = end
        }
    }
}

/// The subscriptions' sort keys, in sorted order, in one byte buffer: the app id, then each
/// key, each followed by a 0 byte. Neither app ids nor keys contain 0 (a control character;
/// when one does, `isUsable` is false), so comparing these keys by bytes orders subscriptions
/// by app, then key by key, a path before its descendants; and 0 bytes delimit the components.
/// Offsets are 32-bit, to keep the temporaries small (`isUsable` is false past 4 GiB).
private struct SortedPaths {
    let subscriptions: [(app: String, path: Path, entry: SubscriptionIndex.Entry)]
    /// Sort key `i` is `bytes[range(i)]`.
    var bytes: [UInt8] = []
    var starts: [UInt32] = []
    /// `order[i]`: the input position of the `i`th subscription in sorted order.
    var order: [UInt32] = []
    var isUsable = true

    var count: Int { order.count }

    func range(_ index: Int) -> Range<Int> {
        Int(starts[index]) ..< Int(starts[index + 1])
    }

    /// Sorts by sort key, then by handle, then by input position (so that the last of two
    /// items for the same (app, path, handle) comes last and wins).
    init(_ subscriptions: [(app: String, path: Path, entry: SubscriptionIndex.Entry)]) {
        self.subscriptions = subscriptions
        order = (0 ..< subscriptions.count).map { UInt32(truncatingIfNeeded: $0) }
        var total = 0
        for (app, path, _) in subscriptions {
            total += app.utf8.count + 1 + path.keys.count
            for key in path.keys { total += key.byteCount }
        }
        guard total < Int(UInt32.max) else {
            isUsable = false
            return
        }
        // Input order first, sized exactly (the largest temporaries of a bulk load).
        var unsorted: [UInt8] = []
        unsorted.reserveCapacity(total)
        var unsortedStarts: [UInt32] = []
        unsortedStarts.reserveCapacity(subscriptions.count + 1)
        var containsNUL = false
        func append(_ component: String) {
            let before = unsorted.count
            unsorted.append(contentsOf: component.utf8)
            containsNUL = containsNUL || unsorted[before...].contains(0)
            unsorted.append(0)
        }
        for (app, path, _) in subscriptions {
            unsortedStarts.append(UInt32(unsorted.count))
            append(app)
            for key in path.keys { append(key.string) }
        }
        unsortedStarts.append(UInt32(unsorted.count))
        isUsable = !containsNUL
        unsorted.withUnsafeBufferPointer { bytes in
            unsortedStarts.withUnsafeBufferPointer { starts in
                subscriptions.withUnsafeBufferPointer { subscriptions in
                    order.sort { a, b in
                        let comparison = compareRanges(
                            bytes, Int(starts[Int(a)]) ..< Int(starts[Int(a) + 1]), Int(starts[Int(b)]) ..< Int(starts[Int(b) + 1]))
                        if comparison != 0 { return comparison < 0 }
                        let (x, y) = (subscriptions[Int(a)].entry.handle, subscriptions[Int(b)].entry.handle)
                        return x != y ? x < y : a < b
                    }
                }
            }
        }
        // Then in sorted order, so that the passes that follow read memory sequentially.
        bytes.reserveCapacity(total)
        starts.reserveCapacity(subscriptions.count + 1)
        for position in order {
            starts.append(UInt32(bytes.count))
            bytes.append(contentsOf: unsorted[Int(unsortedStarts[Int(position)]) ..< Int(unsortedStarts[Int(position) + 1])])
        }
        starts.append(UInt32(bytes.count))
    }

    /// The entry of the `index`th subscription in sorted order (through a pointer, so that only
    /// the entry is read: copying the whole tuple would retain its strings and arrays).
    func entry(_ index: Int) -> SubscriptionIndex.Entry {
        subscriptions.withUnsafeBufferPointer { $0[Int(order[index])].entry }
    }

    /// The run of subscriptions with the same (app, path) starting at `start`: where it ends, and
    /// how many distinct handles it holds (equal handles are adjacent).
    func run(from start: Int) -> (end: Int, distinct: Int) {
        var end = start + 1
        var distinct = 1
        while end < count && equal(end - 1, end) {
            if entry(end - 1).handle != entry(end).handle { distinct += 1 }
            end += 1
        }
        return (end, distinct)
    }

    func equal(_ a: Int, _ b: Int) -> Bool {
        bytes.withUnsafeBufferPointer { compareRanges($0, range(a), range(b)) == 0 }
    }

    /// The components that sort key `index` shares with the one before it, and the offset in
    /// `bytes` just past them. A component is shared when both keys agree up to and including
    /// its terminating 0.
    func shared(at index: Int) -> (components: Int, end: Int) {
        let range = range(index)
        guard index > 0 else { return (0, range.lowerBound) }
        let other = self.range(index - 1)
        var components = 0
        var end = range.lowerBound
        var offset = 0
        while offset < range.count && offset < other.count && bytes[range.lowerBound + offset] == bytes[other.lowerBound + offset] {
            if bytes[range.lowerBound + offset] == 0 {
                components += 1
                end = range.lowerBound + offset + 1
            }
            offset += 1
        }
        return (components, end)
    }

    /// The number of components of sort key `index` from byte offset `from` on.
    func componentCount(of index: Int, from: Int) -> Int {
        var components = 0
        for byte in bytes[from ..< range(index).upperBound] where byte == 0 {
            components += 1
        }
        return components
    }
}

/// Three-way comparison of two ranges of `bytes`, eight bytes at a time (big-endian loads, so
/// that integer order is byte order).
private func compareRanges(_ bytes: UnsafeBufferPointer<UInt8>, _ a: Range<Int>, _ b: Range<Int>) -> Int {
    guard let start = bytes.baseAddress else { return a.count - b.count }
    let base = UnsafeRawPointer(start)
    let common = min(a.count, b.count)
    var index = 0
    while index + 8 <= common {
        let x = UInt64(bigEndian: base.loadUnaligned(fromByteOffset: a.lowerBound + index, as: UInt64.self))
        let y = UInt64(bigEndian: base.loadUnaligned(fromByteOffset: b.lowerBound + index, as: UInt64.self))
        if x != y { return x < y ? -1 : 1 }
        index += 8
    }
    while index < common {
        let x = bytes[a.lowerBound + index]
        let y = bytes[b.lowerBound + index]
        if x != y { return x < y ? -1 : 1 }
        index += 1
    }
    return a.count - b.count
}
