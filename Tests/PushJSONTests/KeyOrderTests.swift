import Testing
@testable import PushJSON

@Suite("Key order (SPEC §2)")
struct KeyOrderTests {
    @Test("integer keys are recognised only in canonical form and 32-bit range", arguments: [
        ("0", Int32?.some(0)), ("7", 7), ("-1", -1), ("42", 42), ("2147483647", Int32.max), ("-2147483648", Int32.min),
        ("2147483648", nil), ("-2147483649", nil), ("01", nil), ("-0", nil), ("00", nil), ("+3", nil),
        ("1_5", nil), ("0x1", nil), ("", nil), ("-", nil), ("1.5", nil), ("١", nil), ("123456789012", nil),
    ] as [(String, Int32?)])
    func integerKeys(key: String, expected: Int32?) {
        #expect(Key(key).integerValue == expected)
    }

    @Test("keys sort integers first, numerically, then by UTF-8 bytes", arguments: [
        (["b", "a", "10", "9", "-1"], ["-1", "9", "10", "a", "b"]),
        (["01", "1", "2147483648", "2147483647", "-2147483648"], ["-2147483648", "1", "2147483647", "01", "2147483648"]),
        (["é", "z", "Z", "a", "B", "日本", "emoji😀", "~", "_x", "-"], ["-", "B", "Z", "_x", "a", "emoji😀", "z", "~", "é", "日本"]),
        (["-0", "0", "00", "-5", "+3"], ["-5", "0", "+3", "-0", "00"]),
        (["ab", "a", "abc", ""], ["", "a", "ab", "abc"]),
    ])
    func ordering(input: [String], expected: [String]) {
        #expect(input.map { Key($0) }.sorted().map(\.string) == expected)
    }

    @Test("keys compare by bytes, not by Unicode canonical equivalence")
    func bytewiseEquality() {
        let composed = Key("\u{E9}")
        let decomposed = Key("e\u{301}")
        #expect(composed != decomposed)
        #expect(Key.compare(composed, decomposed) != 0)
        #expect(Set([composed, decomposed]).count == 2)
    }
}
