import Foundation
import PushDispatchClient
import Testing

/// `node(for:)` and `relativeNode(for:)` follow SPEC §2 as the SDK's `DataNode` does.
@Suite("Nodes follow the path rules of SPEC §2")
struct PathRulesTests {
    /// A service object; no request is made by these tests.
    static func service() throws -> PushDispatch {
        try PushDispatch(
            .init(
                baseURL: URL(string: "http://127.0.0.1:9")!, app: "toto", credentials: { _ in Credentials(uid: "u", token: "t") },
                keyStore: InMemoryDeviceKeyStore()))
    }

    @Test(
        "node(for:) normalises: empty segments and . are no-ops, .. goes up and stops at the root",
        arguments: [
            ("a//b/./c/..", "/a/b"), ("", "/"), ("/", "/"), ("..", "/"), ("../../a", "/a"), ("/users/alice/", "/users/alice"),
            ("./x/./", "/x"), ("a/b/../../..", "/"), ("é/日本", "/é/日本"), ("-1/2147483648", "/-1/2147483648"),
        ])
    func normalises(input: String, expected: String) throws {
        #expect(try Self.service().node(for: input).path == expected)
    }

    @Test(
        "relativeNode(for:) is relative to the node, a leading / included",
        arguments: [
            ("c", "/a/b/c"), ("../c", "/a/c"), ("/x", "/a/b/x"), ("../../..", "/"), (".", "/a/b"), ("c/d/../e", "/a/b/c/e"),
        ])
    func relative(input: String, expected: String) throws {
        let node = try Self.service().node(for: "/a/b")
        #expect(try node.relativeNode(for: input).path == expected)
    }

    @Test(
        "a bad key or a long path is refused with what was wrong",
        arguments: [
            ("a.b", "'.'"), ("a$b", "'$'"), ("a#b", "'#'"), ("x/a[b", "'['"), ("a]b", "']'"), ("a\u{1}b", "U+0001"), ("a\u{7F}", "U+007F"),
            ("<a key of 769 bytes>", "at most 768 bytes"), ("<a path of 2103 bytes>", "at most 2048 bytes"),
        ])
    func refused(input: String, named: String) throws {
        let input =
            switch input {
            case "<a key of 769 bytes>": String(repeating: "k", count: 769)
            case "<a path of 2103 bytes>": Array(repeating: String(repeating: "k", count: 700), count: 3).joined(separator: "/")
            default: input
            }
        let service = try Self.service()
        #expect {
            try service.node(for: input)
        } throws: { error in
            guard let error = error as? PushClientError else { return false }
            return error.code == .invalidArgument && error.message.contains(named) && error.message.utf8.count <= 700
        }
    }

    @Test("key and parent walk the path")
    func keyAndParent() throws {
        let node = try Self.service().node(for: "/rooms/lobby/messages")
        #expect(node.key == "messages")
        #expect(node.parent?.path == "/rooms/lobby")
        #expect(node.parent?.parent?.parent?.path == "/")
        #expect(node.parent?.parent?.parent?.parent == nil)
        #expect(node.parent?.parent?.parent?.key == nil)
        #expect(try node.relativeNode(for: "..") == node.parent)
    }
}
