import PushCore
@testable import PushEngine
import PushJSON
import Testing

/// The weight check (SPEC §11.4) skips counting a put's value when 8 bytes per byte of the
/// record's line stay within `maxWeight`: the compact form of anything parsed from a text is
/// never more than 8 times that text.
@Suite("Weight bound: the compact length of a parsed value against its source's length")
struct WeightBoundTests {
    func ratio(_ text: String) throws -> (length: Int, bound: Int) {
        let bytes = Array(text.utf8)
        let value = try JSONParser.parse(bytes)
        return (value.compactLength(limit: .max)!, JSON.compactLengthBound(sourceBytes: bytes.count))
    }

    @Test("numbers, escapes and structures that grow or shrink when written", arguments: [
        "1e9", "9e18", "1E5", "2e1", "0.1", "-0", "1e-7", "5e-324", "1.7976931348623157e308", "-2.2250738585072014e-308",
        "123456789012345678901234567890", "-9223372036854775809", "9223372036854775807", "1e21", "1.5e300",
        #""\u00e9""#, #""\ud83d\ude00""#, #""\u0001""#, #""\n\t\"\\""#, #""\u2028""#, "[1,2]", "[ 1 , 2 ]", #"{"a":1,"a":2}"#,
        #"{"k":[1e9,2e9,3e9]}"#, "[1e9,1e9,1e9,1e9]", "true", "null", "[]", "{}",
    ])
    func literals(text: String) throws {
        let (length, bound) = try ratio(text)
        #expect(length <= bound, "\(text): \(length) > \(bound)")
    }

    @Test("seeded random documents: always within the bound")
    func seeded() throws {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        let atoms = ["1e9", "9e18", "0.5", "1E-7", "-0", "7", "\"\\u00e9\"", "\"x\"", "\"\\ud83d\\ude00\"", "true", "null", "1e21", "3.25e2"]
        func document(_ depth: Int) -> String {
            if depth == 0 || next(3) == 0 { return atoms[next(atoms.count)] }
            if next(2) == 0 { return "[" + (0..<(1 + next(4))).map { _ in document(depth - 1) }.joined(separator: ",") + "]" }
            return "{" + (0..<(1 + next(4))).map { _ in "\"k\(next(3))\":" + document(depth - 1) }.joined(separator: ",") + "}"
        }
        for _ in 0..<2_000 {
            let text = document(4)
            let (length, bound) = try ratio(text)
            #expect(length <= bound, "\(text): \(length) > \(bound)")
        }
    }

    @Test("the bound saturates instead of overflowing")
    func saturates() {
        #expect(JSON.compactLengthBound(sourceBytes: .max) == .max)
        #expect(JSON.compactLengthBound(sourceBytes: 10) == 80)
    }
}
