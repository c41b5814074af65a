import Testing
@testable import PushCore
import PushJSON

@Suite("Child diffs (SPEC §6)")
struct ChildDiffTests {
    func value(_ text: String) -> JSON? { try! JSONParser.parse(text).treeNormalized(at: .root) }

    @Test("added, changed and removed children", arguments: [
        (#"{"a":1,"b":2,"c":{"x":1}}"#, #"{"a":1,"b":3,"d":[1,null,2]}"#, #"{"d":{"0":1,"2":2}}"#, #"["c"]"#, #"{"b":3}"#),
        ("null", #"{"a":1}"#, #"{"a":1}"#, "[]", "{}"),
        (#"{"a":1}"#, "null", "{}", #"["a"]"#, "{}"),
        ("5", #"{"a":1}"#, #"{"a":1}"#, "[]", "{}"),
        (#"{"a":1}"#, #""s""#, "{}", #"["a"]"#, "{}"),
        ("1", "2", "{}", "[]", "{}"),
        (#"{"a":1}"#, #"{"a":1.0}"#, "{}", "[]", "{}"),
        (#"{"a":1}"#, #"{"a":true}"#, "{}", "[]", #"{"a":true}"#),
        (#"{"10":1,"9":1,"b":1}"#, #"{"a":1}"#, #"{"a":1}"#, #"["9","10","b"]"#, "{}"),
    ])
    func diffs(before: String, after: String, added: String, removed: String, changed: String) {
        let diff = ChildDiff(before: value(before), after: value(after))
        var writer = JSONWriter()
        ChildDiff.writeMembers(diff.added, keysOnly: false, into: &writer)
        #expect(writer.string == added)
        writer.removeAll()
        ChildDiff.writeKeys(diff.removed, into: &writer)
        #expect(writer.string == removed)
        writer.removeAll()
        ChildDiff.writeMembers(diff.changed, keysOnly: false, into: &writer)
        #expect(writer.string == changed)
    }

    @Test("large objects diff correctly across leaf boundaries")
    func largeObjects() {
        var before = JSONObject((0..<3000).map { (Key("k\($0)"), JSON.int(Int64($0))) })
        let original = before
        for i in stride(from: 0, to: 3000, by: 101) { before.remove(Key("k\(i)")) }
        var after = before
        for i in stride(from: 5, to: 3000, by: 211) { after.set(Key("k\(i)"), to: .string("x")) }
        for i in 0..<40 { after.set(Key("new\(i)"), to: .bool(true)) }
        after.remove(Key("k7"))
        let diff = ChildDiff(before: .object(before), after: .object(after))
        // Compare against a plain merge over all members.
        var added: [String] = []
        var removed: [String] = []
        var changed: [String] = []
        for (key, value) in after {
            if let old = before[key] { if old != value { changed.append(key.string) } } else { added.append(key.string) }
        }
        for (key, _) in before where after[key] == nil { removed.append(key.string) }
        #expect(diff.added.map(\.key.string) == added)
        #expect(diff.removed.map(\.string) == removed)
        #expect(diff.changed.map(\.key.string) == changed)
        #expect(ChildDiff(before: .object(original), after: .object(original)).isEmpty)
    }

    @Test("unchanged values produce no event; changed ones produce the mode's event")
    func events() {
        #expect(Event.data(app: "a", path: "/p", mode: .value, before: .int(1), after: .double(1)) == nil)
        #expect(Event.data(app: "a", path: "/p", mode: .noData, before: nil, after: nil) == nil)
        #expect(Event.data(app: "a", path: "/p", mode: .childEvent, before: .int(1), after: .int(2)) == nil)
        #expect(Event.data(app: "a", path: "/p", mode: .value, before: .int(1), after: nil)?.body == .value(nil))
        #expect(Event.data(app: "a", path: "/p", mode: .noData, before: .int(1), after: .int(2))?.body == .noData)
    }
}
