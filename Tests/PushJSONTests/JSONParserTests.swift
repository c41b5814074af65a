import PushTestSupport
import Testing
@testable import PushJSON

@Suite("JSON parser")
struct JSONParserTests {
    @Test("valid documents parse and serialise compactly in key order", arguments: [
        ("null", "null"), ("true", "true"), (" false ", "false"), ("0", "0"), ("-0", "0"), ("-0.0", "0"),
        ("1.0", "1"), ("1.5", "1.5"), ("1e2", "100"), ("1E+2", "100"), ("-12.5e-1", "-1.25"),
        ("9223372036854775807", "9223372036854775807"), ("-9223372036854775808", "-9223372036854775808"),
        ("9223372036854775808", "9.223372036854776e+18"), ("1e21", "1e+21"), ("1e-7", "1e-07"),
        ("0.1", "0.1"), ("123456789012345678901234", "1.2345678901234569e+23"),
        ("\"a\\/b\"", "\"a/b\""), ("\"\\u00e9\\ud83d\\ude00\"", "\"é😀\""), ("\"\\u0000\"", "\"\\u0000\""),
        ("[]", "[]"), ("[1, [2, {}]]", "[1,[2,{}]]"), ("{}", "{}"),
        (#"{"b":1,"a":2,"10":3,"9":4}"#, #"{"9":4,"10":3,"a":2,"b":1}"#),
        (#"{"a":1,"a":2}"#, #"{"a":2}"#),
        (" \t\r\n{ \"k\" : [ 1 , 2 ] } \n", #"{"k":[1,2]}"#),
        ("1e-400", "0"),
    ])
    func valid(input: String, expected: String) throws {
        #expect(try JSONParser.parse(input).description == expected)
    }

    @Test("numbers keep the int64 / double distinction", arguments: [
        ("42", JSON.int(42)), ("-7", .int(-7)), ("42.0", .double(42)), ("4.2e1", .double(42)),
        ("9223372036854775808", .double(9_223_372_036_854_775_808)), ("1e2", .double(100)),
    ])
    func numberKinds(input: String, expected: JSON) throws {
        let parsed = try JSONParser.parse(input)
        switch (parsed, expected) {
        case let (.int(a), .int(b)): #expect(a == b)
        case let (.double(a), .double(b)): #expect(a == b)
        default: Issue.record("\(input) parsed as \(parsed)")
        }
    }

    @Test("doubles are read correctly rounded", arguments: [
        "0.30000000000000004", "2.2250738585072014e-308", "5e-324", "1.7976931348623157e308",
        "0.1", "123456.789e3", "9007199254740993", "3.141592653589793", "1.00000000000000011102230246251565404236316680908203125",
    ])
    func correctRounding(text: String) throws {
        guard case .double(let value) = try JSONParser.parse(text.contains(".") || text.contains("e") ? text : text + ".0") else {
            Issue.record("not a double")
            return
        }
        #expect(value == Double(text)!)
    }

    @Test("invalid documents are rejected with the byte offset and what was expected", arguments: [
        ("", 0, "empty input"),
        ("   ", 3, "empty input"),
        ("{", 1, "expected a string key"),
        ("{\"a\"}", 4, "expected ':'"),
        ("{\"a\":1,}", 7, "expected a string key"),
        ("{\"a\":1 \"b\":2}", 7, "expected ',' or '}'"),
        ("[1,]", 3, "expected a JSON value"),
        ("[1 2]", 3, "expected ',' or ']'"),
        ("[1", 2, "expected ',' or ']'"),
        ("01", 0, "leading zeros"),
        ("-", 1, "expected a digit after '-'"),
        ("1.", 2, "expected a digit after the decimal point"),
        (".5", 0, "expected a JSON value"),
        ("1e", 2, "expected a digit in the exponent"),
        ("+1", 0, "expected a JSON value"),
        ("NaN", 0, "expected a JSON value"),
        ("Infinity", 0, "expected a JSON value"),
        ("1e400", 0, "out of the range"),
        ("-1e400", 0, "out of the range"),
        ("tru", 0, "expected true"),
        ("nul", 0, "expected null"),
        ("\"abc", 4, "unterminated string opened at byte 0"),
        ("\"a\nb\"", 2, "unescaped control character U+000A"),
        ("\"\\x\"", 1, "invalid escape sequence '\\x'"),
        ("\"\\u12\"", 1, "expected 4 hexadecimal digits"),
        ("\"\\ud800\"", 1, "unpaired surrogate \\uD800"),
        ("\"\\ud800\\u0041\"", 1, "unpaired surrogate"),
        ("\"\\udc00\"", 1, "unpaired low surrogate"),
        ("1 2", 2, "after the JSON value"),
        ("{} x", 3, "after the JSON value"),
        ("/* c */ 1", 0, "expected a JSON value"),
        ("{'a':1}", 1, "expected a string key"),
    ])
    func invalid(input: String, offset: Int, reason: String) {
        #expect {
            try JSONParser.parse(input)
        } throws: { error in
            guard let error = error as? JSONParseError else { return false }
            return error.offset == offset && error.reason.contains(reason)
        }
    }

    @Test("invalid UTF-8 is rejected at the offending byte", arguments: [
        ([0x22, 0x61, 0xFF, 0x22], 2),  // never valid
        ([0x22, 0xC0, 0x80, 0x22], 1),  // overlong NUL
        ([0x22, 0xE0, 0x80, 0x80, 0x22], 1),  // overlong
        ([0x22, 0xED, 0xA0, 0x80, 0x22], 1),  // encoded surrogate
        ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], 1),  // above U+10FFFF
        ([0x22, 0xC3, 0x22], 1),  // truncated
        ([0x22, 0x5C, 0x6E, 0xE2, 0x82, 0x22], 3),  // truncated after an escape
    ] as [([UInt8], Int)])
    func invalidUTF8(bytes: [UInt8], offset: Int) {
        #expect {
            try JSONParser.parse(bytes)
        } throws: { error in
            guard let error = error as? JSONParseError else { return false }
            return error.offset == offset && error.reason.contains("UTF-8")
        }
    }

    @Test("nesting is limited")
    func depthLimit() throws {
        let ok = String(repeating: "[", count: JSONParser.maxDepth) + String(repeating: "]", count: JSONParser.maxDepth)
        _ = try JSONParser.parse(ok)
        let deep = String(repeating: "[", count: JSONParser.maxDepth + 1) + String(repeating: "]", count: JSONParser.maxDepth + 1)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deep) }
        let deepObject = String(repeating: "{\"a\":", count: JSONParser.maxDepth + 1) + "1" + String(repeating: "}", count: JSONParser.maxDepth + 1)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deepObject) }
    }

    /// The deepest documents accepted: arrays, objects (members out of key order, so each is
    /// sorted) and the two alternating, `maxDepth` levels each.
    static func deepest() -> [String] {
        let depth = JSONParser.maxDepth
        return [
            String(repeating: "[", count: depth) + String(repeating: "]", count: depth),
            String(repeating: #"{"b":true,"a":"#, count: depth) + "1" + String(repeating: "}", count: depth),
            String(repeating: #"[0,{"k":"#, count: depth / 2) + "null" + String(repeating: "}]", count: depth / 2),
        ]
    }

    /// How deep a value nests, counted without recursion.
    static func depth(of value: JSON) -> Int {
        var deepest = 0
        var pending = [(value, 0)]
        while let (value, depth) = pending.popLast() {
            switch value {
            case .array(let elements):
                deepest = max(deepest, depth + 1)
                pending += elements.map { ($0, depth + 1) }
            case .object(let object):
                deepest = max(deepest, depth + 1)
                pending += object.map { ($0.value, depth + 1) }
            default:
                deepest = max(deepest, depth)
            }
        }
        return deepest
    }

    @Test("the parser keeps its nesting on the heap: the deepest documents parse on a 64 KiB thread stack, and one level more is refused there")
    func deepestOnSmallStack() async throws {
        // A recursive parser needs several hundred KiB of stack for these in a debug build,
        // and overflowed an 8 MiB worker thread's stack under AddressSanitizer (issue 33).
        let results = await runOnThread(stackSize: 64 * 1024) {
            (Self.deepest() + Self.deepest().map { "[" + $0 + "]" }).map { document in
                Result { () throws(JSONParseError) in try JSONParser.parse(document) }
            }
        }
        // Checked and freed here, on a worker thread's full stack.
        let accepted = results.prefix(3)
        for result in accepted {
            #expect(try Self.depth(of: result.get()) == JSONParser.maxDepth)
        }
        #expect(try accepted[1].get().description.hasPrefix(#"{"a":{"a":"#))
        for result in results.dropFirst(3) {
            guard case .failure(let error) = result else {
                Issue.record("a document \(JSONParser.maxDepth + 1) levels deep was accepted")
                continue
            }
            #expect(error.reason == "nesting deeper than \(JSONParser.maxDepth) levels")
        }
        // The refusal points at the container one level too deep.
        guard case .failure(let error) = results[3] else { return }
        #expect(error.offset == JSONParser.maxDepth)
    }

    @Test("a document at the depth limit parses, serialises, compares and is freed within 4 MiB of stack")
    func deepestRoundTripOnStack() async throws {
        // The writer, equality and freeing still recurse, one frame or two per level: in a
        // debug build the writer needs about 1.5 KiB a level. 4 MiB is half the stack of a
        // worker thread under the default `ulimit -s` (docs/testing.md, "Stack depth").
        let outcomes = await runOnThread(stackSize: 4 << 20) {
            Self.deepest().map { document -> Bool in
                guard let value = try? JSONParser.parse(document),
                    let again = try? JSONParser.parse(value.description)
                else { return false }
                return value == again && Self.depth(of: again) == JSONParser.maxDepth
            }
        }
        #expect(outcomes == [true, true, true])
    }

    @Test("large objects parse into a balanced tree in key order")
    func largeObject() throws {
        let members = (0..<5000).reversed().map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        guard case .object(let object) = try JSONParser.parse("{" + members + "}") else {
            Issue.record("not an object")
            return
        }
        #expect(object.count == 5000)
        #expect(object.validateStructure() == nil)
        #expect(object.keys.map(\.string) == (0..<5000).map { "k\($0)" }.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        #expect(object[Key("k1234")] == .int(1234))
    }
}
