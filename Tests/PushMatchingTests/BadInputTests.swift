import PushCore
import PushJSON
import PushTestSupport
import Testing

@testable import PushMatching

/// Seeded, bounded mutation suites over the parsers of what the service admits: payload
/// requests, subscription documents and written data are either accepted or refused with a
/// bounded message naming the field or path; nothing crashes. A failing case prints its seed
/// and round.
@Suite("Bad input: payload requests, subscription documents and written data")
struct MatchingBadInputTests {
    /// Longest message any refusal may have, whatever the input's size.
    static let maxMessageBytes = 3000

    static let requests = [
        #"{"app":"toto","path":"/p","mode":"value","format":"v1","before":{"a":1},"after":{"a":2,"b":[1,null,"x"]}}"#,
        #"{"app":"toto","path":"/a//b/./c","mode":"childEvent","format":"v1","before":{"a":1,"b":2},"after":{"b":3,"c":4}}"#,
        #"{"app":"toto","path":"/p","format":"v1","revoke":"expired"}"#,
        #"{"app":"toto","path":"/","mode":"noData","format":"v1","after":"x"}"#,
    ]

    @Test("payload requests give a payload or a bounded error line", arguments: [1, 2, 3] as [UInt64])
    func payloadRequests(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        var processor = PayloadLineProcessor()
        for round in 0..<2_000 {
            let base = mutator.random.pick(Self.requests)
            let input: [UInt8]
            if mutator.random.chance(50) {
                input = mutator.mutateBytes(Array(base.utf8))
            } else {
                input = Array(mutator.mutateJSON(try JSONParser.parse(base)).description.utf8)
            }
            var out = JSONWriter()
            let ok = input.withUnsafeBufferPointer { processor.process(line: $0, into: &out) }
            let output = try JSONParser.parse(out.bytes)
            guard case .object(let object) = output else {
                Issue.record("seed \(seed) round \(round): output is not an object: \(out.string.prefix(200))")
                continue
            }
            if ok {
                #expect(object.allSatisfy { if case .string = $0.value { return true } else { return false } }, "seed \(seed) round \(round)")
                #expect(object[Key("app")] != nil && object[Key("sp")] != nil)
            } else {
                let message = object[Key("error")]?.stringValue ?? ""
                #expect(!message.isEmpty && message.utf8.count <= Self.maxMessageBytes, "seed \(seed) round \(round): \(message.prefix(200))")
            }
        }
    }

    static let subscription = #"{"kind":"mobile","mode":"value","path":"/users/u1","context":"token","format":"v2","encryption":{"alg":"dir","kid":"k"},"expirationTimestampSeconds":1900000000}"#

    @Test("subscription documents decode or say which field is wrong", arguments: [1, 2, 3] as [UInt64])
    func subscriptionDocuments(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        let base = try JSONParser.parse(Self.subscription)
        for round in 0..<2_000 {
            let input = mutator.mutateJSON(base)
            do {
                let request = try SubscriptionRequest.decode(input, app: "toto", uid: "u1")
                #expect(request.path.string.utf8.count <= Path.maxBytes)
                #expect((request.context?.utf8.count ?? 0) <= SubscriptionRequest.maxContextBytes)
                #expect(request.expiration.map { $0 >= 0 } ?? true)
            } catch {
                #expect(!error.message.isEmpty && error.message.utf8.count <= Self.maxMessageBytes, "seed \(seed) round \(round)")
            }
        }
    }

    @Test("written data normalises or is refused with its path", arguments: [1, 2, 3] as [UInt64])
    func treeWrites(seed: UInt64) throws {
        var mutator = Mutator(seed: seed)
        let base = try JSONParser.parse(#"{"a":{"b":[1,{"c":2}],"d/e":null},"f":"g"}"#)
        var tree = DataTree()
        for round in 0..<2_000 {
            let data = mutator.mutateJSON(base)
            let path = try Path(mutator.random.pick(["/", "/a", "/a/b/0", "/x/y"]))
            do {
                let write = mutator.random.chance(50) ? try TreeWrite.put(at: path, data: data) : try TreeWrite.patch(at: path, data: data)
                tree.apply(write)
            } catch {
                #expect(!error.description.isEmpty && error.description.utf8.count <= Self.maxMessageBytes, "seed \(seed) round \(round)")
            }
        }
        // The tree stays tree-normalised: no null, no array, no empty object anywhere.
        func check(_ value: JSON?) -> Bool {
            switch value {
            case nil: return true
            case .null?, .array?: return false
            case .object(let object)?: return !object.isEmpty && object.allSatisfy { check($0.value) }
            default: return true
            }
        }
        #expect(check(tree.root))
    }
}
