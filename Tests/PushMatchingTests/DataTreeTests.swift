@testable import PushCore
import PushJSON
@testable import PushMatching
import Testing

@Suite("Data tree (SPEC §3)")
struct DataTreeTests {
    func json(_ text: String) -> JSON { try! JSONParser.parse(text) }

    func apply(_ start: String?, _ writes: [(op: String, path: String, data: String)]) throws -> String {
        var tree = DataTree(root: try start.map { try json($0).treeNormalized(at: .root) } ?? nil)
        for write in writes {
            let path = try Path(write.path)
            tree.apply(write.op == "put" ? try TreeWrite.put(at: path, data: json(write.data)) : try TreeWrite.patch(at: path, data: json(write.data)))
        }
        return tree.root?.description ?? "null"
    }

    @Test("writes produce the expected tree", arguments: [
        (nil, [("put", "/", #"{"users":{"alice":{"name":"Alice"}}}"#)], #"{"users":{"alice":{"name":"Alice"}}}"#),
        (#"{"users":{"alice":{"name":"Alice"}}}"#, [("patch", "/users", #"{"bob/name":"Bob","alice":null}"#)], #"{"users":{"bob":{"name":"Bob"}}}"#),
        (#"{"a":{"b":{"c":1}}}"#, [("put", "/a/b/c", "null")], "null"),
        (#"{"a":{"b":{"c":1}},"x":1}"#, [("put", "/a/b/c", "null")], #"{"x":1}"#),
        (#"{"a":{"b":{"c":1,"d":2}}}"#, [("put", "/a/b/c", "null")], #"{"a":{"b":{"d":2}}}"#),
        (nil, [("put", "/l", "[1,null,3,[],{}]")], #"{"l":{"0":1,"2":3}}"#),
        (nil, [("put", "/l", "[null,{}]")], "null"),
        (nil, [("put", "/e", #"{"a":{},"b":null,"c":{"d":{}}}"#)], "null"),
        (nil, [("put", "/n", #"{"i":42,"d":42.0,"big":9223372036854775808,"neg":-0.0}"#)], #"{"n":{"big":9.223372036854776e+18,"d":42,"i":42,"neg":0}}"#),
        (#"{"a":1}"#, [("put", "/a/b", "2")], #"{"a":{"b":2}}"#),
        (#"{"a":1}"#, [("put", "/a/b", "null")], #"{"a":1}"#),
        (#"{"a":{"b":1}}"#, [("put", "/a", "5")], #"{"a":5}"#),
        (#"{"a":1}"#, [("put", "/", "null")], "null"),
        (#"{"a":1}"#, [("patch", "/", "{}")], #"{"a":1}"#),
        (#"{"a":{"b":1,"c":2}}"#, [("patch", "/a", #"{"b":null,"c":null}"#)], "null"),
        (#"{"a":{"b":1}}"#, [("patch", "/a", #"{"x/y/z":true,"b":{"q":[7]}}"#)], #"{"a":{"b":{"q":{"0":7}},"x":{"y":{"z":true}}}}"#),
        (nil, [("patch", "/deep/er", #"{"k":1}"#)], #"{"deep":{"er":{"k":1}}}"#),
    ] as [(String?, [(String, String, String)], String)])
    func writes(start: String?, writes: [(String, String, String)], expected: String) throws {
        #expect(try apply(start, writes.map { (op: $0.0, path: $0.1, data: $0.2) }) == expected)
    }

    @Test("invalid writes are rejected with the reason", arguments: [
        ("put", "/", #"{"a.b":1}"#, "data at /: key \"a.b\" contains '.'"),
        ("put", "/x", #"{"ok":{"bad$":1}}"#, "data at /x/ok: key \"bad$\" contains '$'"),
        ("put", "/x", #"{"":1}"#, "a key is empty"),
        ("patch", "/", "[1]", "patch data must be an object"),
        ("patch", "/", "null", "patch data must be an object"),
        ("patch", "/", #"{"a":1,"a/b":2}"#, "patch keys \"a\" and \"a/b\" overlap"),
        ("patch", "/", #"{"a/b/c":1,"a/b":2}"#, "overlap"),
        ("patch", "/", #"{"a//b":1}"#, "empty segment"),
        ("patch", "/", #"{"a/../b":1}"#, "'.' or '..' segment"),
        ("patch", "/", #"{"/a":1}"#, "empty segment"),
    ])
    func invalidWrites(op: String, path: String, data: String, message: String) {
        #expect {
            _ = try apply(nil, [(op: op, path: path, data: data)])
        } throws: { error in
            String(describing: error).contains(message)
        }
    }

    @Test("a value making a path longer than 2048 bytes is rejected")
    func nestedPathLength() throws {
        let deepKey = String(repeating: "k", count: 700)
        let data = json(#"{"\#(deepKey)":{"\#(deepKey)":{"\#(deepKey)":1}}}"#)
        #expect(throws: DataError.self) { try TreeWrite.put(at: .root, data: data) }
        _ = try TreeWrite.put(at: .root, data: json(#"{"\#(deepKey)":{"\#(deepKey)":1}}"#))
    }

    @Test("a patch is atomic: an invalid key leaves the tree as it was")
    func patchAtomic() throws {
        let tree = DataTree(root: try json(#"{"a":1}"#).treeNormalized(at: .root))
        #expect(throws: DataError.self) { try TreeWrite.patch(at: .root, data: json(#"{"b":2,"c.d":3}"#)) }
        #expect(tree.root?.description == #"{"a":1}"#)
    }

    @Test("the before tree survives a write and shares what the write did not touch")
    func persistence() throws {
        let users = JSONObject((0..<5000).map { (Key("user\($0)"), JSON(dictionaryLiteral: ("name", .string("n\($0)")))) })
        let before = DataTree(root: .object(JSONObject([(Key("users"), JSON.object(users)), (Key("other"), .int(1))])))
        let after = before.applying(try TreeWrite.put(at: Path("/users/user42/name"), data: "changed"))
        #expect(before.value(at: try Path("/users/user42/name")) == "n42")
        #expect(after.value(at: try Path("/users/user42/name")) == "changed")
        let diff = ChildDiff(before: before.value(at: try Path("/users")), after: after.value(at: try Path("/users")))
        #expect(diff.changed.map(\.key) == [Key("user42")])
        #expect(diff.added.isEmpty && diff.removed.isEmpty)
    }
}
