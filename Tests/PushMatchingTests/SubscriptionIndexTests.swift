@testable import PushCore
import PushJSON
@testable import PushMatching
import Testing

/// What one `forEachMatch` call reported, by subscription path.
struct IndexMatch: Equatable, CustomStringConvertible {
    var relation: SubscriptionIndex.Relation
    var entries: [Int64: Mode]

    var description: String { "\(relation) \(entries.sorted { $0.key < $1.key })" }
}

private func matches(_ index: SubscriptionIndex, app: String, path: String) throws -> [Path: IndexMatch] {
    try matches(index, app: app, path: Path(path))
}

/// Runs `forEachMatch` and checks the order it promises: ancestors from the root down, then
/// the node at `path`, then descendants; each node once. The result is keyed by `Path` (found
/// with `path(of:)`), whose keys compare by bytes: a `String` key would merge `/é` and `/e\u{301}`.
private func matches(_ index: SubscriptionIndex, app: String, path write: Path) -> [Path: IndexMatch] {
    var result: [Path: IndexMatch] = [:]
    var lastRank = 0
    var lastAncestorDepth = -1
    index.forEachMatch(app: app, path: write) { relation, node, entries in
        let path = index.path(of: node)
        let rank = relation == .ancestor ? 0 : relation == .same ? 1 : 2
        #expect(rank >= lastRank, "\(relation) at \(path) reported out of order")
        lastRank = rank
        switch relation {
        case .ancestor:
            #expect(path.depth > lastAncestorDepth && path.depth < write.depth && path.isPrefix(of: write))
            lastAncestorDepth = path.depth
        case .same:
            #expect(path == write)
        case .descendant:
            #expect(path.depth > write.depth && write.isPrefix(of: path))
        }
        var byHandle: [Int64: Mode] = [:]
        for entry in entries {
            let previous = byHandle.updateValue(entry.mode, forKey: entry.handle)
            #expect(previous == nil, "handle \(entry.handle) twice")
        }
        #expect(!byHandle.isEmpty, "a node without entries was reported")
        let previous = result.updateValue(IndexMatch(relation: relation, entries: byHandle), forKey: path)
        #expect(previous == nil, "\(path) reported twice")
    }
    return result
}

/// Removes an entry and expects `expected` back (`#expect` cannot call a mutating method).
private func expectRemoval(
    _ index: inout SubscriptionIndex, app: String, path: Path, handle: Int64, _ expected: Bool,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let removed = index.remove(app: app, path: path, handle: handle)
    #expect(removed == expected, "removal of \(handle) at \(app) \(path)", sourceLocation: sourceLocation)
}

/// Expected matches written with path strings (no table below holds two canonically equivalent
/// paths, which a `String`-keyed dictionary would merge).
private func byPath(_ expected: [String: IndexMatch]) throws -> [Path: IndexMatch] {
    try Dictionary(uniqueKeysWithValues: expected.map { (try Path($0.key), $0.value) })
}

/// The fixture of the table-driven tests.
private func sampleIndex() throws -> SubscriptionIndex {
    var index = SubscriptionIndex()
    let subscriptions: [(String, String, Int64, Mode)] = [
        ("a", "/", 1, .noData),
        ("a", "/users", 2, .value),
        ("a", "/users/alice", 3, .childEvent),
        ("a", "/users/alice", 8, .noData),
        ("a", "/users/alice/inbox", 4, .value),
        ("a", "/users/bob", 5, .value),
        ("a", "/rooms/1/messages", 6, .childEvent),
        ("b", "/users/alice", 7, .value),
    ]
    for (app, path, handle, mode) in subscriptions {
        index.insert(app: app, path: try Path(path), entry: .init(handle: handle, mode: mode))
    }
    return index
}

@Suite("Subscription index: relations (SPEC §6)")
struct SubscriptionIndexRelationTests {
    @Test("a write reports its ancestors, itself and its descendants, and nothing else", arguments: [
        ("a", "/users/alice", [
            "/": IndexMatch(relation: .ancestor, entries: [1: .noData]),
            "/users": IndexMatch(relation: .ancestor, entries: [2: .value]),
            "/users/alice": IndexMatch(relation: .same, entries: [3: .childEvent, 8: .noData]),
            "/users/alice/inbox": IndexMatch(relation: .descendant, entries: [4: .value]),
        ]),
        ("a", "/", [
            "/": IndexMatch(relation: .same, entries: [1: .noData]),
            "/users": IndexMatch(relation: .descendant, entries: [2: .value]),
            "/users/alice": IndexMatch(relation: .descendant, entries: [3: .childEvent, 8: .noData]),
            "/users/alice/inbox": IndexMatch(relation: .descendant, entries: [4: .value]),
            "/users/bob": IndexMatch(relation: .descendant, entries: [5: .value]),
            "/rooms/1/messages": IndexMatch(relation: .descendant, entries: [6: .childEvent]),
        ]),
        // Deeper than any subscription: ancestors only.
        ("a", "/users/alice/inbox/m1/body/text", [
            "/": IndexMatch(relation: .ancestor, entries: [1: .noData]),
            "/users": IndexMatch(relation: .ancestor, entries: [2: .value]),
            "/users/alice": IndexMatch(relation: .ancestor, entries: [3: .childEvent, 8: .noData]),
            "/users/alice/inbox": IndexMatch(relation: .ancestor, entries: [4: .value]),
        ]),
        // No node at the write path, nor at its parent.
        ("a", "/nothing/here", ["/": IndexMatch(relation: .ancestor, entries: [1: .noData])]),
        ("a", "/users/carol", [
            "/": IndexMatch(relation: .ancestor, entries: [1: .noData]),
            "/users": IndexMatch(relation: .ancestor, entries: [2: .value]),
        ]),
        // Nodes without entries on the way are skipped, not reported.
        ("a", "/rooms", [
            "/": IndexMatch(relation: .ancestor, entries: [1: .noData]),
            "/rooms/1/messages": IndexMatch(relation: .descendant, entries: [6: .childEvent]),
        ]),
        ("a", "/rooms/1/messages/m9", [
            "/": IndexMatch(relation: .ancestor, entries: [1: .noData]),
            "/rooms/1/messages": IndexMatch(relation: .ancestor, entries: [6: .childEvent]),
        ]),
        // Siblings never match.
        ("a", "/users/bob/inbox", [
            "/": IndexMatch(relation: .ancestor, entries: [1: .noData]),
            "/users": IndexMatch(relation: .ancestor, entries: [2: .value]),
            "/users/bob": IndexMatch(relation: .ancestor, entries: [5: .value]),
        ]),
        // Other applications never match.
        ("b", "/", ["/users/alice": IndexMatch(relation: .descendant, entries: [7: .value])]),
        ("b", "/users", ["/users/alice": IndexMatch(relation: .descendant, entries: [7: .value])]),
        ("b", "/users/alice/inbox", ["/users/alice": IndexMatch(relation: .ancestor, entries: [7: .value])]),
        ("c", "/", [:]),
        ("c", "/users/alice", [:]),
        ("", "/users/alice", [:]),
        ("A", "/users/alice", [:]),
    ] as [(String, String, [String: IndexMatch])])
    func relations(app: String, write: String, expected: [String: IndexMatch]) throws {
        let index = try sampleIndex()
        #expect(index.invariantViolation() == nil)
        #expect(try matches(index, app: app, path: write) == byPath(expected))
    }

    @Test("an empty index and an app with no subscriptions match nothing")
    func empty() throws {
        var index = SubscriptionIndex()
        #expect(try matches(index, app: "a", path: "/").isEmpty)
        index.insert(app: "a", path: try Path("/x"), entry: .init(handle: 1, mode: .value))
        expectRemoval(&index, app: "a", path: try Path("/x"), handle: 1, true)
        #expect(try matches(index, app: "a", path: "/").isEmpty)
        #expect(try matches(index, app: "a", path: "/x").isEmpty)
        #expect(index.count == 0)
        #expect(index.edges.count == 0, "removal prunes the nodes, app root included")
        #expect(index.invariantViolation() == nil)
    }

    @Test("keys and app ids compare by UTF-8 bytes, not by canonical equivalence")
    func unicodeKeys() throws {
        var index = SubscriptionIndex()
        let composed = "\u{E9}"  // é
        let decomposed = "e\u{301}"  // e + combining acute accent: equal as Strings
        #expect(composed == decomposed)
        index.insert(app: "a", path: try Path("/\(composed)"), entry: .init(handle: 1, mode: .value))
        index.insert(app: "a", path: try Path("/\(decomposed)"), entry: .init(handle: 2, mode: .value))
        index.insert(app: composed, path: .root, entry: .init(handle: 3, mode: .value))
        index.insert(app: decomposed, path: .root, entry: .init(handle: 4, mode: .value))
        #expect(index.count == 4)
        #expect(try matches(index, app: "a", path: "/\(composed)/x") == byPath([
            "/\(composed)": IndexMatch(relation: .ancestor, entries: [1: .value]),
        ]))
        #expect(try matches(index, app: "a", path: "/\(decomposed)") == byPath([
            "/\(decomposed)": IndexMatch(relation: .same, entries: [2: .value]),
        ]))
        #expect(try matches(index, app: composed, path: "/") == byPath(["/": IndexMatch(relation: .same, entries: [3: .value])]))
        #expect(try matches(index, app: decomposed, path: "/") == byPath(["/": IndexMatch(relation: .same, entries: [4: .value])]))
        // path(of:) gives back the very bytes.
        var paths: [[UInt8]] = []
        index.forEachMatch(app: "a", path: .root) { _, node, _ in paths.append(Array(index.path(of: node).string.utf8)) }
        #expect(Set(paths) == [Array("/\(composed)".utf8), Array("/\(decomposed)".utf8)])
        expectRemoval(&index, app: "a", path: try Path("/\(decomposed)"), handle: 2, true)
        expectRemoval(&index, app: "a", path: try Path("/\(decomposed)"), handle: 1, false)
        expectRemoval(&index, app: "a", path: try Path("/\(composed)"), handle: 1, true)
        #expect(index.invariantViolation() == nil)
    }

    @Test("the same handle at a node replaces the mode; at another node it is another entry")
    func duplicateHandles() throws {
        var index = SubscriptionIndex()
        let path = try Path("/p/q")
        index.insert(app: "a", path: path, entry: .init(handle: 7, mode: .value))
        index.insert(app: "a", path: path, entry: .init(handle: 7, mode: .childEvent))
        index.insert(app: "a", path: try Path("/p"), entry: .init(handle: 7, mode: .noData))
        index.insert(app: "b", path: path, entry: .init(handle: 7, mode: .value))
        #expect(index.count == 3)
        #expect(try matches(index, app: "a", path: "/p/q") == byPath([
            "/p": IndexMatch(relation: .ancestor, entries: [7: .noData]),
            "/p/q": IndexMatch(relation: .same, entries: [7: .childEvent]),
        ]))
        expectRemoval(&index, app: "a", path: path, handle: 8, false)
        expectRemoval(&index, app: "a", path: try Path("/p/q/r"), handle: 7, false)
        expectRemoval(&index, app: "c", path: path, handle: 7, false)
        expectRemoval(&index, app: "a", path: path, handle: 7, true)
        expectRemoval(&index, app: "a", path: path, handle: 7, false)
        #expect(index.count == 2)
        #expect(try matches(index, app: "a", path: "/p/q") == byPath(["/p": IndexMatch(relation: .ancestor, entries: [7: .noData])]))
        #expect(index.invariantViolation() == nil)
    }

    @Test("a node with many children and entries stays exact through removals in any position")
    func wideNode() throws {
        var index = SubscriptionIndex()
        for user in 0..<3_000 {
            index.insert(app: "a", path: Path(uncheckedKeys: ["users", Key("u\(user)")]), entry: .init(handle: Int64(user), mode: .value))
            index.insert(app: "a", path: try Path("/hot"), entry: .init(handle: Int64(user), mode: .noData))
        }
        for user in stride(from: 0, to: 3_000, by: 3) {
            expectRemoval(&index, app: "a", path: Path(uncheckedKeys: ["users", Key("u\(user)")]), handle: Int64(user), true)
            expectRemoval(&index, app: "a", path: try Path("/hot"), handle: Int64(user), true)
        }
        #expect(index.count == 4_000)
        #expect(index.invariantViolation() == nil)
        #expect(try matches(index, app: "a", path: "/users/u1/x") == byPath(["/users/u1": IndexMatch(relation: .ancestor, entries: [1: .value])]))
        #expect(try matches(index, app: "a", path: "/users/u3").isEmpty)
        #expect(try matches(index, app: "a", path: "/users").count == 2_000)
        let hot = try matches(index, app: "a", path: "/hot")[try Path("/hot")]
        #expect(hot?.entries.count == 2_000 && hot?.entries[1] == .noData && hot?.entries[3] == nil)
        // Shrink the hot node's block down through every size, then grow it again.
        let remaining = (0..<3_000).filter { $0 % 3 != 0 }
        for (removed, user) in remaining.dropLast(3).enumerated() {
            expectRemoval(&index, app: "a", path: try Path("/hot"), handle: Int64(user), true)
            if removed % 97 == 0, let problem = index.invariantViolation() {
                Issue.record("after \(removed) removals: \(problem)")
                return
            }
        }
        for user in 5_000..<5_100 {
            index.insert(app: "a", path: try Path("/hot"), entry: .init(handle: Int64(user), mode: .childEvent))
        }
        #expect(index.invariantViolation() == nil)
        let after = try matches(index, app: "a", path: "/hot")[try Path("/hot")]
        #expect(after?.entries.count == 103 && after?.entries[Int64(remaining.last!)] == .noData && after?.entries[5_050] == .childEvent)
    }

    @Test("copies are independent values")
    func valueSemantics() throws {
        let original = try sampleIndex()
        var copy = original
        expectRemoval(&copy, app: "a", path: try Path("/users/bob"), handle: 5, true)
        copy.insert(app: "a", path: try Path("/new"), entry: .init(handle: 9, mode: .value))
        #expect(try matches(original, app: "a", path: "/users/bob")[try Path("/users/bob")] != nil)
        #expect(try matches(original, app: "a", path: "/new")[try Path("/new")] == nil)
        #expect(try matches(copy, app: "a", path: "/users/bob")[try Path("/users/bob")] == nil)
        #expect(original.invariantViolation() == nil && copy.invariantViolation() == nil)
    }

    @Test("the key arena is compacted once freed bytes outnumber live ones")
    func compaction() throws {
        var index = SubscriptionIndex()
        index.compactionMinimum = 0
        for round in 0..<4 {
            for user in 0..<200 {
                index.insert(app: "a", path: Path(uncheckedKeys: ["users", Key("user-\(round)-\(user)"), "inbox"]),
                             entry: .init(handle: Int64(user), mode: .value))
            }
            for user in 0..<200 where user % 10 != 0 {
                expectRemoval(&index, app: "a", path: Path(uncheckedKeys: ["users", Key("user-\(round)-\(user)"), "inbox"]),
                                     handle: Int64(user), true)
            }
            #expect(index.invariantViolation() == nil)
        }
        #expect(index.compactions > 0)
        #expect(index.freedKeyBytes <= index.keyBytes.count - index.freedKeyBytes)
        #expect(try matches(index, app: "a", path: "/users").count == 80)
        #expect(try matches(index, app: "a", path: "/users/user-2-30") == byPath([
            "/users/user-2-30/inbox": IndexMatch(relation: .descendant, entries: [30: .value]),
        ]))
    }
}

/// xorshift64*: deterministic random operations.
struct IndexTestRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }
    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 2_685_821_657_736_338_717
    }
    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
}

/// The reference: every (app, path) with its entries, scanned linearly for each write.
private struct Reference {
    struct Location: Hashable {
        var app: [UInt8]
        var path: Path
    }

    struct Subscription: Hashable {
        var location: Location
        var handle: Int64
    }

    var subscriptions: [Location: [Int64: Mode]] = [:]
    /// The live subscriptions in an order that does not depend on `Hasher`'s per-process seed,
    /// so that a seed always gives the same operations.
    private(set) var live: [Subscription] = []
    private var positions: [Subscription: Int] = [:]
    var count: Int { live.count }

    mutating func insert(app: String, path: Path, handle: Int64, mode: Mode) {
        let location = Location(app: Array(app.utf8), path: path)
        subscriptions[location, default: [:]][handle] = mode
        let subscription = Subscription(location: location, handle: handle)
        if positions[subscription] == nil {
            positions[subscription] = live.count
            live.append(subscription)
        }
    }

    mutating func remove(app: String, path: Path, handle: Int64) -> Bool {
        let location = Location(app: Array(app.utf8), path: path)
        guard subscriptions[location]?.removeValue(forKey: handle) != nil else { return false }
        if subscriptions[location]!.isEmpty { subscriptions[location] = nil }
        let position = positions.removeValue(forKey: Subscription(location: location, handle: handle))!
        let last = live.removeLast()
        if position < live.count {
            live[position] = last
            positions[last] = position
        }
        return true
    }

    func matches(app: String, path write: Path) -> [Path: IndexMatch] {
        let appBytes = Array(app.utf8)
        var result: [Path: IndexMatch] = [:]
        for (location, entries) in subscriptions where location.app == appBytes {
            if location.path == write {
                result[location.path] = IndexMatch(relation: .same, entries: entries)
            } else if location.path.isPrefix(of: write) {
                result[location.path] = IndexMatch(relation: .ancestor, entries: entries)
            } else if write.isPrefix(of: location.path) {
                result[location.path] = IndexMatch(relation: .descendant, entries: entries)
            }
        }
        return result
    }
}

@Suite("Subscription index: randomized against a linear reference")
struct SubscriptionIndexRandomTests {
    /// The empty id is not a valid app id (SPEC §11.2) but the index handles it: a 0-byte key.
    static let apps = ["app", "other", "\u{E9}", "e\u{301}", ""]
    /// Few keys, so paths share prefixes; integer-like, non-ASCII, and canonically equivalent ones.
    static let keys: [Key] = ["users", "u1", "u2", "inbox", "a", "b", "0", "-1", "10", "\u{E9}", "e\u{301}", "東京", "😀",
                              "a-much-longer-key-of-more-than-sixteen-bytes"]

    static func randomPath(_ rng: inout IndexTestRandom) -> Path {
        // Mostly shallow, sometimes deep.
        let depth = rng.below(4) == 0 ? rng.below(10) : rng.below(4)
        return Path(uncheckedKeys: (0..<depth).map { _ in rng.pick(keys) })
    }

    @Test("random inserts and removals keep every match exact", arguments: [1, 2, 3, 4] as [UInt64])
    func randomOperations(seed: UInt64) {
        var rng = IndexTestRandom(seed: seed)
        var index = seed % 2 == 0 ? SubscriptionIndex() : SubscriptionIndex(minimumCapacity: 50)
        index.compactionMinimum = 0  // compact as often as the rule allows
        var reference = Reference()
        var removedPresent = 0
        var removedAbsent = 0
        for batch in 0..<40 {
            // Grow during the first half, shrink during the second, so both pruning and reuse run.
            let insertShare = batch < 20 ? 65 : 35
            for _ in 0..<100 {
                let app = rng.pick(Self.apps)
                if rng.below(100) < insertShare {
                    let path = Self.randomPath(&rng)
                    let handle = Int64(rng.below(30))
                    let mode = rng.pick(Mode.allCases)
                    index.insert(app: app, path: path, entry: .init(handle: handle, mode: mode))
                    reference.insert(app: app, path: path, handle: handle, mode: mode)
                } else {
                    let app: String
                    let path: Path
                    let handle: Int64
                    if rng.below(4) != 0, !reference.live.isEmpty {
                        let subscription = rng.pick(reference.live)
                        app = String(decoding: subscription.location.app, as: UTF8.self)
                        path = subscription.location.path
                        handle = subscription.handle
                    } else {
                        app = rng.pick(Self.apps)
                        path = Self.randomPath(&rng)
                        handle = Int64(rng.below(30))
                    }
                    let removed = index.remove(app: app, path: path, handle: handle)
                    #expect(removed == reference.remove(app: app, path: path, handle: handle))
                    if removed { removedPresent += 1 } else { removedAbsent += 1 }
                }
            }
            #expect(index.count == reference.count)
            if let problem = index.invariantViolation() {
                Issue.record("batch \(batch): \(problem)")
                return
            }
            for _ in 0..<60 {
                let app = rng.pick(Self.apps + ["absent"])
                let write = Self.randomPath(&rng)
                let got = matches(index, app: app, path: write)
                let expected = reference.matches(app: app, path: write)
                if got != expected {
                    Issue.record("batch \(batch), write \(app) \(write): got \(got), expected \(expected)")
                    return
                }
            }
        }
        #expect(removedPresent > 500 && removedAbsent > 100, "both kinds of removal ran")
        #expect(index.compactions > 0, "the arena was compacted")
        // Remove everything: the index goes back to the forest root alone.
        for subscription in reference.live {
            let app = String(decoding: subscription.location.app, as: UTF8.self)
            expectRemoval(&index, app: app, path: subscription.location.path, handle: subscription.handle, true)
        }
        #expect(index.count == 0 && index.edges.count == 0 && index.handles.count == 0)
        #expect(index.invariantViolation() == nil)
    }
    @Test("a bulk load equals the same insertions one by one, and is sized exactly", arguments: [5, 6] as [UInt64])
    func bulkLoad(seed: UInt64) {
        var rng = IndexTestRandom(seed: seed)
        var items: [(app: String, path: Path, entry: SubscriptionIndex.Entry)] = []
        for _ in 0..<2_000 {
            // Repeated (app, path, handle) triples with other modes: the last one wins.
            items.append((rng.pick(Self.apps), Self.randomPath(&rng), .init(handle: Int64(rng.below(30)), mode: rng.pick(Mode.allCases))))
        }
        let bulk = SubscriptionIndex(bulkLoading: items)
        var reference = Reference()
        for item in items {
            reference.insert(app: item.app, path: item.path, handle: item.entry.handle, mode: item.entry.mode)
        }
        #expect(bulk.invariantViolation() == nil)
        #expect(bulk.count == reference.count)
        #expect(bulk.nodes.count == bulk.statistics.nodes + 1, "no node allocated beyond the count")
        #expect(bulk.keyBytes.count == bulk.statistics.liveKeyBytes && bulk.freedKeyBytes == 0)
        #expect(bulk.nodes.capacity < bulk.nodes.count + 8, "the node array did not grow past its exact size")
        #expect(bulk.freeBlocks.allSatisfy { $0 == 0 }, "each node's entry block was allocated once, at its final size")
        for _ in 0..<300 {
            let app = rng.pick(Self.apps)
            let write = Self.randomPath(&rng)
            let got = matches(bulk, app: app, path: write)
            let expected = reference.matches(app: app, path: write)
            if got != expected {
                Issue.record("write \(app) \(write): got \(got), expected \(expected)")
                return
            }
        }
        // The loaded index is an ordinary one: it keeps working under changes.
        var index = bulk
        for subscription in reference.live.prefix(500) {
            let app = String(decoding: subscription.location.app, as: UTF8.self)
            expectRemoval(&index, app: app, path: subscription.location.path, handle: subscription.handle, true)
        }
        index.insert(app: "app", path: Path(uncheckedKeys: ["users", "u9"]), entry: .init(handle: 1, mode: .value))
        #expect(index.invariantViolation() == nil)
        #expect(index.count == reference.count - 500 + 1)
    }

    @Test("a bulk load of keys that no path accepts (a NUL byte) falls back to plain insertions")
    func bulkLoadWithNUL() {
        let odd = Path(uncheckedKeys: ["x\u{0}y"])
        let items: [(app: String, path: Path, entry: SubscriptionIndex.Entry)] = [
            ("a", odd, .init(handle: 1, mode: .value)),
            ("a", Path(uncheckedKeys: ["x"]), .init(handle: 2, mode: .value)),
            ("a", Path(uncheckedKeys: ["x", "y"]), .init(handle: 3, mode: .value)),
            ("b\u{0}", Path(uncheckedKeys: ["x"]), .init(handle: 4, mode: .value)),
        ]
        let index = SubscriptionIndex(bulkLoading: items)
        #expect(index.invariantViolation() == nil && index.count == 4)
        #expect(matches(index, app: "a", path: Path(uncheckedKeys: ["x"])) == [
            Path(uncheckedKeys: ["x"]): IndexMatch(relation: .same, entries: [2: .value]),
            Path(uncheckedKeys: ["x", "y"]): IndexMatch(relation: .descendant, entries: [3: .value]),
        ])
        #expect(matches(index, app: "a", path: odd) == [odd: IndexMatch(relation: .same, entries: [1: .value])])
        #expect(matches(index, app: "b", path: .root).isEmpty)
    }
}
