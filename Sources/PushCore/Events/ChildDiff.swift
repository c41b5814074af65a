import PushJSON

/// How the children of a node differ between two versions (SPEC §6).
///
/// `added`: keys absent before and present after, with their new values; `changed`: keys
/// present in both with different values (SPEC §11.1 equality), with their new values;
/// `removed`: keys present before and absent after. All in key order. A primitive has no
/// children.
public struct ChildDiff: Sendable, Equatable {
    public var added: ContiguousArray<JSONObject.Member>
    public var removed: [Key]
    public var changed: ContiguousArray<JSONObject.Member>

    public init(
        added: ContiguousArray<JSONObject.Member> = [], removed: [Key] = [],
        changed: ContiguousArray<JSONObject.Member> = []
    ) {
        self.added = added
        self.removed = removed
        self.changed = changed
    }

    /// Whether no child differs.
    public var isEmpty: Bool {
        added.isEmpty && removed.isEmpty && changed.isEmpty
    }

    /// The diff of the children of `before` and `after`.
    ///
    /// Walks both member sequences in key order at once; runs of members that both versions
    /// share (the same stored leaf, left alone by the write) are skipped without comparing.
    public init(before: JSON?, after: JSON?) {
        self.init()
        let beforeLeaves = ChildDiff.leaves(of: before)
        let afterLeaves = ChildDiff.leaves(of: after)
        var a = (leaf: 0, index: 0)
        var b = (leaf: 0, index: 0)
        while a.leaf < beforeLeaves.count && b.leaf < afterLeaves.count {
            let leafA = beforeLeaves[a.leaf]
            let leafB = afterLeaves[b.leaf]
            if a.index == 0 && b.index == 0 && leafA.count == leafB.count
                && leafIdentity(leafA) == leafIdentity(leafB)
            {
                a.leaf += 1
                b.leaf += 1
                continue
            }
            let x = leafA[a.index]
            let y = leafB[b.index]
            let order = Key.compare(x.key, y.key)
            if order < 0 {
                removed.append(x.key)
                ChildDiff.advance(&a, in: beforeLeaves)
            } else if order > 0 {
                added.append(y)
                ChildDiff.advance(&b, in: afterLeaves)
            } else {
                if !(x.value == y.value) { changed.append(y) }
                ChildDiff.advance(&a, in: beforeLeaves)
                ChildDiff.advance(&b, in: afterLeaves)
            }
        }
        while a.leaf < beforeLeaves.count {
            removed.append(beforeLeaves[a.leaf][a.index].key)
            ChildDiff.advance(&a, in: beforeLeaves)
        }
        while b.leaf < afterLeaves.count {
            added.append(afterLeaves[b.leaf][b.index])
            ChildDiff.advance(&b, in: afterLeaves)
        }
    }

    private static func leaves(of value: JSON?) -> [ContiguousArray<JSONObject.Member>] {
        guard case .object(let object)? = value else { return [] }
        var leaves: [ContiguousArray<JSONObject.Member>] = []
        object.forEachLeaf { if !$0.isEmpty { leaves.append($0) } }
        return leaves
    }

    private static func advance(
        _ cursor: inout (leaf: Int, index: Int), in leaves: [ContiguousArray<JSONObject.Member>]
    ) {
        cursor.index += 1
        if cursor.index == leaves[cursor.leaf].count {
            cursor.leaf += 1
            cursor.index = 0
        }
    }

    /// A diff from members given as pairs (for tests and callers that build diffs by hand).
    public init(added: [(Key, JSON)], removed: [Key] = [], changed: [(Key, JSON)] = []) {
        self.init(
            added: ContiguousArray(added.map { JSONObject.Member($0.0, $0.1) }), removed: removed,
            changed: ContiguousArray(changed.map { JSONObject.Member($0.0, $0.1) }))
    }

    public static func == (lhs: ChildDiff, rhs: ChildDiff) -> Bool {
        lhs.removed == rhs.removed
            && lhs.added.elementsEqual(rhs.added, by: { $0.key == $1.key && $0.value == $1.value })
            && lhs.changed.elementsEqual(rhs.changed, by: { $0.key == $1.key && $0.value == $1.value })
    }
}

extension ChildDiff {
    /// Writes members as a JSON object; with `keysOnly` every value is `true`.
    public static func writeMembers(
        _ members: ContiguousArray<JSONObject.Member>, keysOnly: Bool, into writer: inout JSONWriter
    ) {
        writer.withSink { writeMembers(members, keysOnly: keysOnly, PlainLevel.self, &$0) }
    }

    /// Writes keys as a JSON array of strings.
    public static func writeKeys(_ keys: [Key], into writer: inout JSONWriter) {
        writer.withSink { writeKeys(keys, PlainLevel.self, &$0) }
    }

    @inlinable
    package static func writeMembers<L: EscapeLevel>(
        _ members: ContiguousArray<JSONObject.Member>, keysOnly: Bool, _ level: L.Type, _ sink: inout ByteSink
    ) {
        sink.append(UInt8(ascii: "{"))
        var first = true
        for member in members {
            if !first { sink.append(UInt8(ascii: ",")) }
            first = false
            sink.writeString(member.key.string, level)
            sink.append(UInt8(ascii: ":"))
            if keysOnly { sink.append("true") } else { sink.write(member.value, level) }
        }
        sink.append(UInt8(ascii: "}"))
    }

    @inlinable
    package static func writeKeys<L: EscapeLevel>(_ keys: [Key], _ level: L.Type, _ sink: inout ByteSink) {
        sink.append(UInt8(ascii: "["))
        var first = true
        for key in keys {
            if !first { sink.append(UInt8(ascii: ",")) }
            first = false
            sink.writeString(key.string, level)
        }
        sink.append(UInt8(ascii: "]"))
    }
}
