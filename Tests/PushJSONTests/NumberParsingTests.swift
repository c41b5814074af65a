import Foundation
import Testing
@testable import PushJSON

@Suite("Number parsing (Eisel–Lemire) against strtod")
struct NumberParsingTests {
    static let sweep = Int(ProcessInfo.processInfo.environment["TEST_NUMBER_SWEEP"] ?? "") ?? 200_000

    func parsedDouble(_ text: String) -> Double? {
        switch try? JSONParser.parse(text) {
        case .double(let value)?: return value
        case .int(let value)?: return Double(value)
        default: return nil
        }
    }

    @Test("random decimals of 1 to 20 digits with exponents across the range read as strtod reads them")
    func randomDecimals() {
        var rng = SystemRandomNumberGenerator()
        var mismatches: [String] = []
        for _ in 0..<Self.sweep {
            let digits = Int.random(in: 1...20, using: &rng)
            var significand = String(Int.random(in: 1...9, using: &rng))
            for _ in 1..<digits { significand.append(String(Int.random(in: 0...9, using: &rng))) }
            let point = Int.random(in: 0...digits, using: &rng)
            var text = point == digits || point == 0
                ? significand : String(significand.prefix(point)) + "." + significand.dropFirst(point)
            if point == 0 { text = "0." + significand }
            let exponent = Int.random(in: -345...330, using: &rng)
            text += "e\(exponent)"
            if Bool.random(using: &rng) { text = "-" + text }
            guard let expected = Double(text), expected.isFinite else { continue }
            if parsedDouble(text)?.bitPattern != expected.bitPattern && mismatches.count < 10 {
                mismatches.append(text)
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    @Test("every double's shortest form and 17-digit form read back exactly")
    func roundTrips() {
        var rng = SystemRandomNumberGenerator()
        var mismatches: [String] = []
        for _ in 0..<(Self.sweep / 4) {
            let value = Double(bitPattern: rng.next())
            guard value.isFinite else { continue }
            for text in [value.description, String(format: "%.17e", value), String(format: "%.16e", value)] {
                let parsed = parsedDouble(text)
                if parsed != value && mismatches.count < 10 { mismatches.append(text) }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    @Test("hard cases: halfway points, range edges, subnormals", arguments: [
        "9007199254740993", "9007199254740995", "9007199254740993.0", "2.2250738585072011e-308", "2.2250738585072014e-308",
        "2.2250738585072012e-308", "4.9406564584124654e-324", "2.4703282292062327e-324", "2.4703282292062328e-324",
        "1.7976931348623157e308", "1.7976931348623158e308", "0.1e-342", "1e-343", "7.2057594037927933e16",
        "1.00000000000000011102230246251565404236316680908203125", "8.98846567431158e307", "3.0e-44",
        "123456789012345678", "1234567890123456789", "12345678901234567890", "0.000001", "1e22", "1e23", "5e-324",
        "4.35679e-310", "1.8e-323", "6.631236846766476e-316", "9.999999999999999e22", "1.0000000000000002",
    ])
    func hardCases(text: String) {
        #expect(parsedDouble(text)?.bitPattern == Double(text)!.bitPattern)
    }

    @Test("beyond the double range is an error, below it is zero")
    func range() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse("1.7976931348623159e308") }
        #expect(throws: JSONParseError.self) { try JSONParser.parse("-1e309") }
        #expect(parsedDouble("1e-400") == 0)
        #expect(parsedDouble("-1e-400")?.sign == .minus)
    }
}
