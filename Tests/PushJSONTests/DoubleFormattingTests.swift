import Foundation
import Testing
@testable import PushJSON

@Suite("Double formatting (Schubfach) against Double.description")
struct DoubleFormattingTests {
    /// Iterations for the random sweep; raise with TEST_DOUBLE_SWEEP for a long run.
    static let sweep = Int(ProcessInfo.processInfo.environment["TEST_DOUBLE_SWEEP"] ?? "") ?? 300_000

    func formatted(_ value: Double) -> String {
        var writer = JSONWriter()
        writer.writeDouble(value)
        return writer.string
    }

    @Test("random bit patterns, every exponent, format as the description-based oracle does")
    func randomBitPatterns() {
        var rng = SystemRandomNumberGenerator()
        var mismatches: [String] = []
        for _ in 0..<Self.sweep {
            let value = Double(bitPattern: rng.next())
            guard value.isFinite else { continue }
            let (ours, theirs) = (formatted(value), DescriptionOracle.format(value))
            if ours != theirs && mismatches.count < 10 { mismatches.append("\(value.bitPattern): \(ours) vs \(theirs)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    @Test("edge values format as the description-based oracle does")
    func edges() {
        var values: [Double] = [
            .leastNonzeroMagnitude, .leastNormalMagnitude, .greatestFiniteMagnitude, .ulpOfOne, 1e-4, 9.999999999999999e-5,
            1e16, 9999999999999998, 1e23, 0.1, 0.2, 0.3, 1 / 3.0,
            // The three smallest subnormals (5e-324, 1e-323, 1.5e-323) and the largest subnormal's
            // neighbour that once hung parsers (2.2250738585072009e-308), read at run time: as
            // literals they are rounded with a warning.
            Double(bitPattern: 1), Double(bitPattern: 2), Double(bitPattern: 3), Double("2.2250738585072009e-308")!,
        ]
        for e in -1074...1023 {
            let p = Foundation.pow(2.0, Double(e))
            values += [p, p.nextUp, p.nextDown]
        }
        for e in -323...308 {
            let p = Double("1e\(e)")!
            values += [p, p.nextUp, p.nextDown]
        }
        for subnormal in 1...4096 { values.append(Double(bitPattern: UInt64(subnormal))) }
        var mismatches: [String] = []
        for value in values where value.isFinite && value != 0 {
            for signed in [value, -value] {
                let (ours, theirs) = (formatted(signed), DescriptionOracle.format(signed))
                if ours != theirs && mismatches.count < 10 { mismatches.append("\(signed): \(ours) vs \(theirs)") }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    @Test("formatted doubles read back to the same value")
    func roundTrip() throws {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let value = Double(bitPattern: rng.next())
            guard value.isFinite else { continue }
            let parsed = try JSONParser.parse(formatted(value))
            switch parsed {
            case .double(let back): #expect(back == value)
            case .int(let back): #expect(Double(back) == value)
            default: Issue.record("not a number")
            }
        }
    }
}
