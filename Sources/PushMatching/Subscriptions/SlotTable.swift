import PushCore

/// An open-addressing hash table of `(tag, id)` pairs: the hashing half of a hash map whose keys
/// and values live elsewhere (in ``SubscriptionIndex``'s node and entry arrays).
///
/// Each slot is one `UInt64`: the key's 32-bit hash (the *tag*) in the high half and a non-zero
/// 32-bit id in the low half; `0` marks an empty slot, which is why id 0 may never be stored.
/// The table never sees keys: ``find(tag:matching:)`` hands the ids whose tag matches to the
/// caller, which compares the real key. A full-width tag means that a probe almost never looks
/// at a key that does not match (two keys in the same probe run share all 32 bits with
/// probability about 2⁻³²·run length).
///
/// - Home slot: `tag × capacity >> 32` (Lemire's "fastrange"), so the capacity need not be a
///   power of two and ``init(minimumCapacity:)`` can size the table to its expected count.
///   Because the home slot is a function of the stored tag, growing never rehashes keys.
/// - Collisions: linear probing, which reads consecutive slots (one or two cache lines).
/// - Removal: backward-shift deletion, so there are no tombstones and probe runs never
///   lengthen with churn.
/// - Load: at most 3/4 (an unsuccessful probe reads ~8.5 slots on average at that load, a
///   successful one ~2.5); growth multiplies the capacity by 3/2, so the load stays between 1/2
///   and 3/4.
///   The table never shrinks (like `Dictionary`): its capacity is its high-water mark.
///
/// Tags must come from a keyed hash (`Hasher`, seeded per process): keys come from untrusted
/// clients, and a predictable hash would let them build one long probe run. (The environment
/// variable `SWIFT_DETERMINISTIC_HASHING` turns the seeding off: the service must not set it.)
struct SlotTable: Sendable {
    /// `tag << 32 | id`, or 0 for an empty slot.
    private(set) var slots: [UInt64]
    /// Occupied slots.
    private(set) var count: Int

    /// A table that holds `minimumCapacity` ids at a load of about 0.7 before it grows.
    init(minimumCapacity: Int = 0) {
        let capacity = max(8, minimumCapacity + minimumCapacity * 3 / 7 + 1)
        precondition(capacity <= 1 << 32, "SlotTable: more than 2^32 slots")
        slots = Array(repeating: 0, count: capacity)
        count = 0
    }

    /// Bytes of the slot array.
    var footprint: Int { slots.capacity * MemoryLayout<UInt64>.stride }

    @inline(__always)
    private static func home(of tag: UInt32, capacity: Int) -> Int {
        Int(truncatingIfNeeded: (UInt64(tag) &* UInt64(truncatingIfNeeded: capacity)) >> 32)
    }

    /// The id in `slot`.
    @inline(__always)
    func id(at slot: Int) -> UInt32 {
        UInt32(truncatingIfNeeded: slots[slot])
    }

    /// The first slot whose tag is `tag` and whose id satisfies `matching`, or `nil`.
    /// Cost: the probe run from the tag's home slot to the first empty slot.
    @inline(__always)
    func find(tag: UInt32, matching: (UInt32) -> Bool) -> Int? {
        slots.withUnsafeBufferPointer { slots in
            let capacity = slots.count
            var index = SlotTable.home(of: tag, capacity: capacity)
            while true {
                let slot = slots[index]
                if slot == 0 { return nil }
                if UInt32(truncatingIfNeeded: slot >> 32) == tag, matching(UInt32(truncatingIfNeeded: slot)) {
                    return index
                }
                index += 1
                if index == capacity { index = 0 }
            }
        }
    }

    /// Replaces the id in `slot`, keeping its tag (the entry's key is unchanged, it moved).
    mutating func setID(_ id: UInt32, at slot: Int) {
        precondition(id != 0, "SlotTable: id 0 marks empty slots")
        slots[slot] = slots[slot] & 0xFFFF_FFFF_0000_0000 | UInt64(id)
    }

    /// Stores `id` under `tag`. The caller has checked that its key is absent; `id` is not 0.
    mutating func insert(tag: UInt32, id: UInt32) {
        precondition(id != 0, "SlotTable: id 0 marks empty slots")
        if (count + 1) * 4 > slots.count * 3 {
            grow()
        }
        SlotTable.place(UInt64(tag) << 32 | UInt64(id), in: &slots)
        count += 1
    }

    /// Empties `slot` (found by ``find(tag:matching:)``), shifting back the slots after it that
    /// probed past it so that every stored tag stays reachable from its home slot.
    mutating func remove(at slot: Int) {
        slots.withUnsafeMutableBufferPointer { slots in
            let capacity = slots.count
            var hole = slot
            var next = slot
            while true {
                next += 1
                if next == capacity { next = 0 }
                let moving = slots[next]
                if moving == 0 { break }
                let home = SlotTable.home(of: UInt32(truncatingIfNeeded: moving >> 32), capacity: capacity)
                // `moving` may fill the hole unless its home lies cyclically in (hole, next]:
                // then the hole is not on its probe path.
                let stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
                if stays { continue }
                slots[hole] = moving
                hole = next
            }
            slots[hole] = 0
        }
        count -= 1
    }

    /// Grows the capacity by half; O(capacity), amortised O(1) per insertion. Only the tags are
    /// needed to place the slots again.
    private mutating func grow() {
        let capacity = slots.count + slots.count / 2
        precondition(capacity <= 1 << 32, "SlotTable: more than 2^32 slots")
        var larger = [UInt64](repeating: 0, count: capacity)
        for slot in slots where slot != 0 {
            SlotTable.place(slot, in: &larger)
        }
        slots = larger
    }

    private static func place(_ slot: UInt64, in slots: inout [UInt64]) {
        slots.withUnsafeMutableBufferPointer { slots in
            let capacity = slots.count
            var index = home(of: UInt32(truncatingIfNeeded: slot >> 32), capacity: capacity)
            while slots[index] != 0 {
                index += 1
                if index == capacity { index = 0 }
            }
            slots[index] = slot
        }
    }
}
