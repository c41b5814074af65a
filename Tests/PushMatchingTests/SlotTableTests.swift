@testable import PushCore
@testable import PushMatching
import Testing

@Suite("Slot table (open addressing under the subscription index)")
struct SlotTableTests {
    /// Tags from a tiny set: every slot collides, and tags near 2³² have their home slot at the
    /// end of the table, so probe runs wrap around and backward shifts cross the end.
    @Test("colliding and wrapping tags stay reachable through inserts, removals and growth",
          arguments: [1, 2, 3] as [UInt64])
    func collisions(seed: UInt64) {
        let tags: [UInt32] = [0, 1, 0x8000_0000, UInt32.max - 1, UInt32.max]
        var rng = IndexTestRandom(seed: seed)
        var table = SlotTable()
        var live: [UInt32: UInt32] = [:]  // id → tag
        var nextID: UInt32 = 1
        for step in 0..<3_000 {
            if rng.below(100) < 60 || live.isEmpty {
                let tag = rng.pick(tags)
                table.insert(tag: tag, id: nextID)
                live[nextID] = tag
                nextID += 1
            } else {
                let id = live.keys.min { ($0 &* 2_654_435_761) < ($1 &* 2_654_435_761) }!  // a scattered choice
                let tag = live.removeValue(forKey: id)!
                guard let slot = table.find(tag: tag, matching: { $0 == id }) else {
                    Issue.record("step \(step): id \(id) lost before its removal")
                    return
                }
                table.remove(at: slot)
                #expect(table.find(tag: tag, matching: { $0 == id }) == nil)
            }
            #expect(table.count == live.count)
            if step % 50 == 0 || step > 2_900 {
                for (id, tag) in live where table.find(tag: tag, matching: { $0 == id }).map({ table.id(at: $0) }) != id {
                    Issue.record("step \(step): id \(id) with tag \(tag) is not reachable")
                    return
                }
            }
        }
        #expect(table.slots.count * 3 >= table.count * 4, "the load stays at most 3/4")
    }

    @Test("a sized table does not grow before it holds its expected count")
    func sizing() {
        var table = SlotTable(minimumCapacity: 1_000)
        let capacity = table.slots.count
        #expect(capacity >= 1_000 * 4 / 3)
        for id in 1 ... 1_000 as ClosedRange<UInt32> {
            table.insert(tag: id &* 2_654_435_761, id: id)
        }
        #expect(table.slots.count == capacity)
        table.insert(tag: 7, id: 1_001)
        #expect(table.count == 1_001)
    }
}
