import PushTestSupport
import Testing

@testable import PushJSON

/// A seeded, bounded mutation suite over the JSON parser: every input is either accepted
/// correctly or refused with the byte at fault and a bounded message; nothing crashes. A
/// failing case prints its seed and round so that it can be kept as a regular test.
@Suite("Bad input: the JSON parser")
struct JSONBadInputTests {
    /// Longest message any refusal may have, whatever the input's size.
    static let maxMessageBytes = 3000

    static let documents = [
        #"{"a":[1,2.5,-0,1e10,"x\u0041\n"],"b":{"c":null,"d":true},"é":"日本"}"#,
        #"[{"k":"v"},[],{},"",0,-9223372036854775808,9223372036854775807,1.7976931348623157e308]"#,
        #"{"users":{"alice":{"name":"Alice","age":30,"tags":["a","b"]}}}"#,
    ]

    @Test("the JSON parser accepts or names the byte at fault", arguments: [1, 2, 3] as [UInt64])
    func jsonParser(seed: UInt64) {
        var mutator = Mutator(seed: seed)
        for round in 0..<2_000 {
            let input = mutator.mutateBytes(Array(mutator.random.pick(Self.documents).utf8))
            do {
                let value = try JSONParser.parse(input)
                // Whatever parses writes back to text that parses to the same value.
                #expect(try JSONParser.parse(value.description) == value, "seed \(seed) round \(round)")
            } catch {
                #expect(error.offset >= 0 && error.offset <= input.count, "seed \(seed) round \(round): offset \(error.offset)")
                #expect(!error.reason.isEmpty && error.description.utf8.count <= Self.maxMessageBytes)
            }
        }
    }
}
