extension JSONParser {
    // MARK: - Numbers

    mutating func parseNumber() throws(JSONParseError) -> JSON {
        let start = position
        var negative = false
        if input[position] == UInt8(ascii: "-") {
            negative = true
            position += 1
        }
        guard position < input.count, isDigit(input[position]) else {
            throw fail("invalid number; expected a digit after '-'", at: position)
        }
        // Integer part, accumulated while it fits.
        var magnitude: UInt64 = 0
        var overflow = false
        var significantDigits = 0
        if input[position] == UInt8(ascii: "0") {
            position += 1
            if position < input.count && isDigit(input[position]) {
                throw fail("invalid number; leading zeros are not allowed", at: start)
            }
        } else {
            while position < input.count, isDigit(input[position]) {
                let digit = UInt64(input[position] &- UInt8(ascii: "0"))
                if !overflow {
                    let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = times10.addingReportingOverflow(digit)
                    if o1 || o2 { overflow = true } else { magnitude = sum }
                }
                significantDigits += 1
                position += 1
            }
        }
        var isInteger = true
        var fractionDigits = 0
        if position < input.count && input[position] == UInt8(ascii: ".") {
            isInteger = false
            position += 1
            guard position < input.count, isDigit(input[position]) else {
                throw fail("invalid number; expected a digit after the decimal point", at: position)
            }
            while position < input.count, isDigit(input[position]) {
                let digit = UInt64(input[position] &- UInt8(ascii: "0"))
                if !overflow {
                    let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = times10.addingReportingOverflow(digit)
                    if o1 || o2 { overflow = true } else { magnitude = sum }
                }
                fractionDigits += 1
                position += 1
            }
        }
        var exponent = 0
        if position < input.count && (input[position] | 0x20) == UInt8(ascii: "e") {
            isInteger = false
            position += 1
            var exponentNegative = false
            if position < input.count && (input[position] == UInt8(ascii: "+") || input[position] == UInt8(ascii: "-")) {
                exponentNegative = input[position] == UInt8(ascii: "-")
                position += 1
            }
            guard position < input.count, isDigit(input[position]) else {
                throw fail("invalid number; expected a digit in the exponent", at: position)
            }
            while position < input.count, isDigit(input[position]) {
                if exponent < 100_000 {
                    exponent = exponent * 10 + Int(input[position] &- UInt8(ascii: "0"))
                }
                position += 1
            }
            if exponentNegative { exponent = -exponent }
        }
        if isInteger && !overflow {
            if negative {
                if magnitude <= UInt64(Int64.max) + 1 {
                    return .int(magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude))
                }
            } else if magnitude <= UInt64(Int64.max) {
                return .int(Int64(magnitude))
            }
        }
        // Exact fast path (Clinger): mantissa below 2^53 and a power of ten that is exact.
        let scale = exponent - fractionDigits
        if !overflow && magnitude < (1 << 53) && scale >= -22 && scale <= 22 {
            var value = Double(magnitude)
            if scale < 0 { value /= powersOfTen[-scale] } else { value *= powersOfTen[scale] }
            return .double(negative ? -value : value)
        }
        let value: Double
        if !overflow {
            value = EiselLemire.double(significand: magnitude, exponent: scale, negative: negative)
        } else {
            // More than 64 bits of significand: the C library's correctly rounded strtod.
            let text = String(decoding: UnsafeBufferPointer(rebasing: input[start..<position]), as: UTF8.self)
            value = Double(text) ?? .infinity
        }
        guard value.isFinite else {
            let text = String(decoding: UnsafeBufferPointer(rebasing: input[start..<position]), as: UTF8.self)
            throw fail("number \(JSONWriter.quoted(text)) is out of the range of a binary64 double", at: start)
        }
        return .double(value)
    }

    @inline(__always)
    func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") <= 9
    }
}

/// 10^0 … 10^22, all exactly representable as doubles.
let powersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
    1e18, 1e19, 1e20, 1e21, 1e22,
]
