@testable import PushJSON

/// The reference for the serialiser's double formatting: digits taken from Swift's
/// `Double.description` (shortest round-trip digits), laid out as SPEC §7.1 says. Slow, simple,
/// independent of the Schubfach implementation it checks.
enum DescriptionOracle {
    static func format(_ value: Double) -> String {
        if JSONWriter.isWrittenAsInteger(value) { return String(Int64(value)) }
        let (digits, exponent) = shortestDigits(value)
        var out = value < 0 ? "-" : ""
        let text = String(decoding: digits, as: UTF8.self)
        let count = digits.count
        if exponent >= -4 && exponent < 16 {
            if exponent >= 0 {
                let padded = text + String(repeating: "0", count: max(0, exponent + 1 - count))
                let integer = padded.prefix(exponent + 1)
                let fraction = padded.dropFirst(exponent + 1)
                out += integer + "." + (fraction.isEmpty ? "0" : fraction)
            } else {
                out += "0." + String(repeating: "0", count: -exponent - 1) + text
            }
        } else {
            out += String(text.prefix(1)) + (count > 1 ? "." + text.dropFirst() : "")
            out += "e" + (exponent < 0 ? "-" : "+") + (abs(exponent) < 10 ? "0" : "") + String(abs(exponent))
        }
        return out
    }

    /// The shortest round-trip decimal digits of |value| (no leading or trailing zeros) and the
    /// decimal exponent of the first digit: |value| = d.ddd × 10^exponent.
    static func shortestDigits(_ value: Double) -> (digits: [UInt8], exponent: Int) {
        let text = Array(value.magnitude.description.utf8)
        var mantissa = text[...]
        var exponent = 0
        if let e = text.firstIndex(where: { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            mantissa = text[..<e]
            var index = e + 1
            var negative = false
            if text[index] == UInt8(ascii: "-") || text[index] == UInt8(ascii: "+") {
                negative = text[index] == UInt8(ascii: "-")
                index += 1
            }
            var magnitude = 0
            while index < text.count {
                magnitude = magnitude * 10 + Int(text[index] - UInt8(ascii: "0"))
                index += 1
            }
            exponent = negative ? -magnitude : magnitude
        }
        // mantissa is "iii.fff" or "iii"; value = iii.fff × 10^exponent.
        var digits: [UInt8] = []
        digits.reserveCapacity(mantissa.count)
        var pointPosition = mantissa.count
        for byte in mantissa {
            if byte == UInt8(ascii: ".") {
                pointPosition = digits.count
            } else {
                digits.append(byte)
            }
        }
        if pointPosition == mantissa.count { pointPosition = digits.count }
        // Strip leading zeros: each shifts the first digit one place right.
        var leading = 0
        while leading < digits.count - 1 && digits[leading] == UInt8(ascii: "0") { leading += 1 }
        digits.removeFirst(leading)
        while digits.count > 1 && digits[digits.count - 1] == UInt8(ascii: "0") { digits.removeLast() }
        // The first remaining digit sits at 10^(pointPosition - 1 - leading + exponent).
        return (digits, pointPosition - 1 - leading + exponent)
    }
}
