import Testing
@testable import PushJSON

@Suite("Persistent objects (B-tree)")
struct JSONObjectTests {
    /// Deterministic pseudo-random numbers (SplitMix64).
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("random sets and removals match a reference map and keep the invariants", arguments: [1, 2, 3, 4])
    func randomOperations(seed: UInt64) {
        var rng = SplitMix(state: seed)
        var object = JSONObject()
        var reference: [String: Int64] = [:]
        var snapshots: [(JSONObject, [String: Int64])] = []
        for step in 0..<6000 {
            let key = String(rng.next() % 3000 &- 100)  // integer keys, some negative
            let name = rng.next() % 4 == 0 ? "k" + key : key  // and some non-integer keys
            if rng.next() % 3 == 0 {
                object.remove(Key(name))
                reference[name] = nil
            } else {
                object.set(Key(name), to: .int(Int64(step)))
                reference[name] = Int64(step)
            }
            if step % 1000 == 0 { snapshots.append((object, reference)) }
        }
        #expect(object.validateStructure() == nil)
        #expect(object.count == reference.count)
        let expectedKeys = reference.keys.map { Key($0) }.sorted()
        #expect(object.keys == expectedKeys)
        for (key, value) in reference {
            #expect(object[Key(key)] == .int(value))
        }
        // Earlier versions are untouched by later writes.
        for (snapshot, expected) in snapshots {
            #expect(snapshot.count == expected.count)
            #expect(snapshot.validateStructure() == nil)
            for (key, value) in expected { #expect(snapshot[Key(key)] == .int(value)) }
        }
    }

    @Test("removing everything leaves an empty object, in either direction", arguments: [false, true])
    func drain(reverse: Bool) {
        var object = JSONObject((0..<2000).map { (Key("key\($0)"), JSON.int(Int64($0))) })
        #expect(object.height == 3)
        var keys = object.keys
        if reverse { keys.reverse() }
        for (i, key) in keys.enumerated() {
            object.remove(key)
            if i % 97 == 0 { #expect(object.validateStructure() == nil) }
        }
        #expect(object.isEmpty)
        #expect(object.validateStructure() == nil)
    }

    @Test("an update copies one path and shares every other leaf")
    func structuralSharing() {
        let before = JSONObject((0..<10_000).map { (Key("u\($0)"), JSON.int(Int64($0))) })
        let after = before.setting(Key("u5000"), to: .string("changed"))
        var beforeLeaves: [UnsafeRawPointer?] = []
        var afterLeaves: [UnsafeRawPointer?] = []
        before.forEachLeaf { beforeLeaves.append(leafIdentity($0)) }
        after.forEachLeaf { afterLeaves.append(leafIdentity($0)) }
        #expect(beforeLeaves.count == afterLeaves.count)
        let differing = zip(beforeLeaves, afterLeaves).filter { $0 != $1 }.count
        #expect(differing == 1)
        #expect(before[Key("u5000")] == .int(5000))
        #expect(after[Key("u5000")] == .string("changed"))
    }

    @Test("iteration follows key order across leaves")
    func iteration() {
        let object = JSONObject((0..<500).map { (Key(String($0 * 7 % 500)), JSON.bool(true)) })
        #expect(object.map(\.key.string) == (0..<500).map(String.init))
        #expect(Array(object).count == 500)
    }

    @Test("later duplicates win")
    func duplicates() {
        let object = JSONObject([(Key("a"), JSON.int(1)), (Key("b"), .int(2)), (Key("a"), .int(3))])
        #expect(object.count == 2)
        #expect(object[Key("a")] == .int(3))
        let many = JSONObject((0..<100).map { (Key("k\($0 % 10)"), JSON.int(Int64($0))) })
        #expect(many.count == 10)
        #expect(many[Key("k3")] == .int(93))
    }
}
