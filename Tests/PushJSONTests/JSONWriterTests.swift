import Testing
@testable import PushJSON

@Suite("Compact serialisation (SPEC §7.1)")
struct JSONWriterTests {
    @Test("strings escape exactly quote, backslash and control characters", arguments: [
        ("quote\"", #""quote\"""#),
        ("back\\slash", #""back\\slash""#),
        ("\u{08}\u{0C}\n\r\t", #""\b\f\n\r\t""#),
        ("\u{00}\u{01}\u{1F}", #""\u0000\u0001\u001f""#),
        ("\u{0B}\u{1B}", #""\u000b\u001b""#),
        ("del\u{7F}", "\"del\u{7F}\""),
        ("a/b", #""a/b""#),
        ("é日本", "\"é日本\""),
        ("😀", "\"😀\""),
        ("\u{2028}\u{2029}", "\"\u{2028}\u{2029}\""),
        ("", #""""#),
    ])
    func escapes(input: String, expected: String) {
        #expect(JSON.string(input).description == expected)
    }

    @Test("every control character has its escape")
    func allControlCharacters() {
        let short: [UInt8: String] = [0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"]
        for byte in UInt8(0)..<0x20 {
            let expected = short[byte] ?? "\\u00" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)
            #expect(JSON.string(String(UnicodeScalar(byte))).description == "\"" + expected + "\"")
        }
    }

    @Test("numbers follow SPEC §7.1", arguments: [
        (JSON.int(0), "0"), (.int(-1), "-1"), (.int(Int64.max), "9223372036854775807"), (.int(Int64.min), "-9223372036854775808"),
        (.double(1.0), "1"), (.double(-0.0), "0"), (.double(-2.5), "-2.5"), (.double(0.1), "0.1"), (.double(100.5), "100.5"),
        (.double(123456789.0), "123456789"), (.double(9_007_199_254_740_991), "9007199254740991"),
        (.double(9_007_199_254_740_992), "9007199254740992.0"), (.double(9_007_199_254_740_994), "9007199254740994.0"),
        (.double(-9_007_199_254_740_994), "-9007199254740994.0"),
        (.double(1e15 + 0.5), "1000000000000000.5"), (.double(1e16), "1e+16"), (.double(1e21), "1e+21"),
        (.double(1e-7), "1e-07"), (.double(1e-5), "1e-05"), (.double(0.0001), "0.0001"), (.double(0.00012345), "0.00012345"),
        (.double(1.2345678901234568e+17), "1.2345678901234568e+17"), (.double(5e-324), "5e-324"),
        (.double(0.1 + 0.2), "0.30000000000000004"), (.double(1.7976931348623157e308), "1.7976931348623157e+308"),
        (.double(-1.5e-10), "-1.5e-10"), (.double(2.5e100), "2.5e+100"), (.double(3.141592653589793), "3.141592653589793"),
    ])
    func numbers(value: JSON, expected: String) {
        #expect(value.description == expected)
    }

    @Test("objects come out in key order whatever the input order")
    func objectOrder() {
        let value: JSON = ["b": 1, "10": 2, "a": 3, "9": 4, "-1": 5, "01": 6, "2147483648": 7, "é": 8, "B": 9]
        #expect(value.description == #"{"-1":5,"9":4,"10":2,"01":6,"2147483648":7,"B":9,"a":3,"b":1,"é":8}"#)
    }

    @Test("equality is equality of serialisations (SPEC §11.1)", arguments: [
        (JSON.int(1), JSON.double(1.0), true), (.double(-0.0), .int(0), true), (.bool(true), .int(1), false),
        (.double(9_007_199_254_740_992), .int(9_007_199_254_740_992), false), (.string("\u{E9}"), .string("e\u{301}"), false),
        (["a": 1, "b": 2], ["b": 2.0, "a": 1], true), ([1, 2], [1, 2.5], false), (.null, .bool(false), false),
    ] as [(JSON, JSON, Bool)])
    func equality(a: JSON, b: JSON, equal: Bool) {
        #expect((a == b) == equal)
        #expect((Array(a.description.utf8) == Array(b.description.utf8)) == equal)
    }
}
